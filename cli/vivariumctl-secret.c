/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/stat.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-secret.h"
#include "vivariumctl-commands.h"

/* The secret verbs (docs/secrets.md). A value is never an argument: it
 * comes from a file or standard input, and what reaches the daemon is a
 * descriptor to read it from, so no message on the bus (and no argv in
 * /proc) ever holds it. This client does not read the value when it can
 * help it; from a terminal it must, and wipes what it read. */

typedef struct {
  gchar  **hosts;
  gchar   *header;
  gchar   *format;
  gchar   *value_file;
  gboolean replace;
} AddOptions;

static void
add_options_clear (AddOptions *o)
{
  g_strfreev (o->hosts);
  g_free (o->header);
  g_free (o->format);
  g_free (o->value_file);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (AddOptions, add_options_clear)

/* The daemon's own checks (common/), on everything but the value, which
 * this client has not seen: a stand-in passes the value's check so that
 * only a real mistake of the caller's is a usage error here. */
static gboolean
check_fields (const gchar *name, const AddOptions *o, GError **error)
{
  g_autoptr(GBytes) stand_in = g_bytes_new_static ("x", 1);
  VivariumSecret secret = {
    .name = (gchar *) name,
    .hosts = o->hosts,
    .header = o->header != NULL ? o->header : (gchar *) VIVARIUM_SECRET_DEFAULT_HEADER,
    .format = o->format != NULL ? o->format : (gchar *) VIVARIUM_SECRET_DEFAULT_FORMAT,
    .value = stand_in,
  };

  if (o->hosts == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("--host HOST is required: where the value may go (repeat)"));
    return FALSE;
  }
  if (!vctl_check_text ("the name", name, 256, error))
    return FALSE;
  for (guint i = 0; o->hosts[i] != NULL; i++)
    if (!vctl_check_text ("--host", o->hosts[i], 256, error))
      return FALSE;
  if ((o->header != NULL && !vctl_check_text ("--header", o->header, 256, error)) ||
      (o->format != NULL && !vctl_check_text ("--format", o->format, 1024, error)))
    return FALSE;
  return vivarium_secret_check (&secret, error) || vctl_to_usage_error (error);
}

static gint
open_value_file (const gchar *file, GError **error)
{
  g_autofree gchar *shown = vctl_escape_line (file);
  struct stat st;
  gint fd = open (file, O_RDONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0) {
    gint saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot open “%s”: %s"), shown,
                 g_strerror (saved));
    return -1;
  }
  if (fstat (fd, &st) != 0 || !(S_ISREG (st.st_mode) || S_ISFIFO (st.st_mode))) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 _("“%s” is not a file or a pipe to read a secret's value from"), shown);
    close (fd);
    return -1;
  }
  return fd;
}

/* One line, echo off; its newline is kept, as a file's would be (the
 * daemon drops one). The prompt comes after echo is off, so that nothing
 * typed in answer to it is shown or flushed. */
static gboolean
read_terminal_line (const gchar *prompt, gchar *buf, gsize size, gsize *len, GError **error)
{
  struct termios saved, quiet;
  gboolean restore = tcgetattr (STDIN_FILENO, &saved) == 0;

  if (restore) {
    quiet = saved;
    quiet.c_lflag &= ~(tcflag_t) ECHO;
    tcsetattr (STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  g_printerr ("%s", prompt);
  *len = 0;
  while (*len < size) {
    gssize n = read (STDIN_FILENO, buf + *len, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0 || buf[(*len)++] == '\n')
      break;
  }
  if (restore)
    tcsetattr (STDIN_FILENO, TCSAFLUSH, &saved);
  g_printerr ("\n");
  if (*len == size) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 _("The value is longer than %d bytes, the limit for a secret"), VIVARIUM_SECRET_MAX_VALUE);
    return FALSE;
  }
  return TRUE;
}

static gint
value_pipe_from_terminal (const gchar *name, GError **error)
{
  /* One byte more than the limit plus a newline: "too long" is then seen. */
  gchar buf[VIVARIUM_SECRET_MAX_VALUE + 2];
  g_autofree gchar *shown = vctl_escape_line (name);
  g_autofree gchar *prompt = g_strdup_printf (_("Value of the secret %s (not shown; end with Enter): "), shown);
  gsize len = 0;
  gssize written;
  gint fds[2];

  if (!read_terminal_line (prompt, buf, sizeof buf, &len, error)) {
    memset (buf, 0, sizeof buf);
    return -1;
  }
  if (pipe2 (fds, O_CLOEXEC) != 0) {
    gint saved = errno;
    memset (buf, 0, sizeof buf);
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot make a pipe: %s"), g_strerror (saved));
    return -1;
  }
  /* A pipe holds 64 KiB: the whole value fits before anyone reads it. */
  written = write (fds[1], buf, len);
  memset (buf, 0, sizeof buf);
  close (fds[1]);
  if (written != (gssize) len) {
    close (fds[0]);
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_FAILED, _("Cannot pass the value on through a pipe"));
    return -1;
  }
  return fds[0];
}

/* The descriptor the daemon reads: the file, standard input itself when it
 * is a file or a pipe, or a pipe fed from the terminal. */
static GUnixFDList *
value_fd_list (const gchar *name, const AddOptions *o, GError **error)
{
  g_autoptr(GUnixFDList) list = g_unix_fd_list_new ();
  gint fd;

  if (o->value_file != NULL)
    fd = open_value_file (o->value_file, error);
  else if (isatty (STDIN_FILENO))
    fd = value_pipe_from_terminal (name, error);
  else
    fd = fcntl (STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) {
    if (error != NULL && *error == NULL)
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), _("Cannot use standard input: %s"),
                   g_strerror (errno));
    return NULL;
  }
  if (g_unix_fd_list_append (list, fd, error) < 0) {
    close (fd);
    return NULL;
  }
  close (fd);
  return g_steal_pointer (&list);
}

static GVariant *
add_options_to_variant (const AddOptions *o)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  /* Only what was given: the daemon owns the defaults. */
  if (o->header != NULL)
    g_variant_builder_add (&b, "{sv}", "header", g_variant_new_string (o->header));
  if (o->format != NULL)
    g_variant_builder_add (&b, "{sv}", "format", g_variant_new_string (o->format));
  if (o->replace)
    g_variant_builder_add (&b, "{sv}", "replace", g_variant_new_boolean (TRUE));
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

gboolean
vctl_cmd_secret_add (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(AddOptions) o = { 0 };
  g_autoptr(GUnixFDList) fds = NULL;
  g_autoptr(GVariant) options = NULL;
  g_autofree gchar *shown = NULL;
  const gchar *name;
  const GOptionEntry entries[] = {
    { "host", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.hosts,
      N_("A host the value may go to: api.example.org or *.example.org, no port (repeat)"), "HOST" },
    { "header", 0, 0, G_OPTION_ARG_STRING, &o.header,
      N_("The request header the egress proxy sets (default: Authorization)"), "H" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &o.format,
      N_("The header's value, {} standing for the secret (default: 'Bearer {}')"), "F" },
    { "replace", 0, 0, G_OPTION_ARG_NONE, &o.replace, N_("Replace a secret of that name"), NULL },
    { "value-file", 0, 0, G_OPTION_ARG_FILENAME, &o.value_file,
      N_("Read the value from FILE (default: standard input; never an argument)"), "FILE" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error))
    return FALSE;
  name = (*argv)[1];
  if (!check_fields (name, &o, error) || !vctl_check_local (ctx, "secret add", error))
    return FALSE;
  fds = value_fd_list (name, &o, error);
  if (fds == NULL)
    return FALSE;
  options = add_options_to_variant (&o);
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_add_secret_sync (ctx->manager, name, (const gchar * const *) o.hosts, options,
                                                   g_variant_new_handle (0), vctl_call_flags (ctx),
                                                   VIVARIUM_CALL_TIMEOUT_DEFAULT, fds, NULL, NULL, error))
    return FALSE;
  shown = vctl_escape_line (name);
  g_print (o.replace ? _("Stored the secret “%s” (replacing any of that name).\n") : _("Stored the secret “%s”.\n"),
           shown);
  return TRUE;
}

/* --- secret list ------------------------------------------------------- */

typedef struct {
  const gchar  *name;
  const gchar  *header;
  const gchar  *format;
  gchar       **hosts;        /* owned */
  guint64       added_at;
} SecretRow;

/* Missing or mistyped members read as empty: the row is still shown. The
 * strings point into @v; the hosts are the row's own. */
static void
row_from_variant (GVariant *v, SecretRow *row)
{
  g_autoptr(GVariant) hosts = NULL;
  GVariantDict dict;

  memset (row, 0, sizeof *row);
  row->name = row->header = row->format = "";
  g_variant_dict_init (&dict, v);
  g_variant_dict_lookup (&dict, "name", "&s", &row->name);
  g_variant_dict_lookup (&dict, "header", "&s", &row->header);
  g_variant_dict_lookup (&dict, "format", "&s", &row->format);
  g_variant_dict_lookup (&dict, "added_at", "t", &row->added_at);
  hosts = g_variant_dict_lookup_value (&dict, "hosts", G_VARIANT_TYPE_STRING_ARRAY);
  row->hosts = hosts != NULL ? g_variant_dup_strv (hosts, NULL) : g_new0 (gchar *, 1);
  g_variant_dict_clear (&dict);
}

static void
add_json_row (JsonBuilder *b, const SecretRow *row)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, row->name);
  json_builder_set_member_name (b, "hosts");
  json_builder_begin_array (b);
  for (guint i = 0; row->hosts[i] != NULL; i++)
    json_builder_add_string_value (b, row->hosts[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "header");
  json_builder_add_string_value (b, row->header);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, row->format);
  json_builder_set_member_name (b, "added_at");
  json_builder_add_int_value (b, (gint64) MIN (row->added_at, (guint64) G_MAXINT64));
  json_builder_end_object (b);
}

#define SECRET_ROW "%-24s %-19s %-16s %-16s %s\n"

static void
print_row (const SecretRow *row)
{
  g_autofree gchar *name = vctl_escape_line (row->name);
  g_autofree gchar *header = vctl_escape_line (row->header);
  g_autofree gchar *format = vctl_escape_line (row->format);
  g_autofree gchar *joined = g_strjoinv (",", row->hosts);
  g_autofree gchar *hosts = vctl_escape_line (joined);
  g_autofree gchar *added = vctl_format_time (row->added_at > G_MAXUINT64 / G_USEC_PER_SEC
                                                ? 0 : row->added_at * G_USEC_PER_SEC);

  g_print (SECRET_ROW, name, added, header, format, hosts);
}

gboolean
vctl_cmd_secret_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(JsonBuilder) json = json_builder_new ();
  g_autoptr(GVariant) secrets = NULL;
  gsize n;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error) || !vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_list_secrets_sync (ctx->manager, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                     &secrets, NULL, error))
    return FALSE;
  n = g_variant_n_children (secrets);
  if (!ctx->json && n == 0)
    g_print ("%s\n", _("No secrets."));
  else if (!ctx->json)
    g_print (SECRET_ROW, _("NAME"), _("ADDED"), _("HEADER"), _("FORMAT"), _("HOSTS"));
  json_builder_begin_array (json);
  for (gsize i = 0; i < n; i++) {
    g_autoptr(GVariant) v = g_variant_get_child_value (secrets, i);
    g_auto(GStrv) hosts = NULL;
    SecretRow row;

    row_from_variant (v, &row);
    hosts = row.hosts;
    if (ctx->json)
      add_json_row (json, &row);
    else
      print_row (&row);
  }
  json_builder_end_array (json);
  if (ctx->json) {
    g_autoptr(JsonNode) root = json_builder_get_root (json);
    vctl_print_json (root);
  }
  return TRUE;
}

/* --- secret remove ----------------------------------------------------- */

gboolean
vctl_cmd_secret_remove (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error))
    return FALSE;
  if (!vivarium_secret_name_is_valid ((*argv)[1])) {
    shown = vctl_escape_line ((*argv)[1]);
    g_set_error (error, VCTL_USAGE_ERROR, 0,
                 _("“%s” is not a secret's name (a letter or '_', then at most 63 letters, digits or '_')"), shown);
    return FALSE;
  }
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_remove_secret_sync (ctx->manager, (*argv)[1], vctl_call_flags (ctx),
                                                      VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL, error))
    return FALSE;
  shown = vctl_escape_line ((*argv)[1]);
  g_print (_("Removed the secret “%s”; sessions that hold it keep it until they end.\n"), shown);
  return TRUE;
}
