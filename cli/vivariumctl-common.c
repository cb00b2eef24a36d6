/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-remote.h"
#include "vivariumctl-common.h"

G_DEFINE_QUARK (vctl-usage-error-quark, vctl_usage_error)

gchar *
vctl_command_synopsis (const VctlCommand *cmd)
{
  GString *s = g_string_new (cmd->group);

  if (s->len > 0)
    g_string_append_c (s, ' ');
  g_string_append (s, cmd->verb);
  if (cmd->arguments[0] != '\0')
    g_string_append_printf (s, " %s", cmd->arguments);
  return g_string_free (s, FALSE);
}

/* GOption converts option values from the locale's character set and
 * fails with a bare conversion error; that is still the caller's mistake,
 * and found before anything was sent. */
static gboolean
parse_options (GOptionContext *octx, gchar ***argv, GError **error)
{
  g_autoptr(GError) error_local = NULL;

  if (g_option_context_parse_strv (octx, argv, &error_local))
    return TRUE;
  if (error_local->domain == G_CONVERT_ERROR) {
    g_set_error (error, VCTL_USAGE_ERROR, 0,
                 _("An option's value is not text in this locale's character set: %s"),
                 error_local->message);
    return FALSE;
  }
  g_propagate_error (error, g_steal_pointer (&error_local));
  return FALSE;
}

gboolean
vctl_parse_args (VctlContext *ctx, const VctlCommand *cmd, const GOptionEntry *entries,
                 gboolean listing, gchar ***argv, guint min_args, guint max_args,
                 GError **error)
{
  return vctl_parse_args_full (ctx, cmd, entries, listing, FALSE, argv, min_args, max_args,
                               error);
}

/* Global options may also follow the verb, so every command's parser knows
 * them and writes into the same context fields. @stop_at_argument leaves
 * everything from the first non-option on alone (a guest's argv), and a
 * "--" before it in place, for the caller to drop. */
gboolean
vctl_parse_args_full (VctlContext *ctx, const VctlCommand *cmd, const GOptionEntry *entries,
                      gboolean listing, gboolean stop_at_argument, gchar ***argv,
                      guint min_args, guint max_args, GError **error)
{
  g_autofree gchar *param = NULL;
  g_autoptr(GOptionContext) octx = NULL;
  guint n_args;
  const GOptionEntry common_entries[] = {
    { "no-interaction", 0, 0, G_OPTION_ARG_NONE, &ctx->no_interaction,
      N_("Never ask for a password; fail instead"), NULL },
    { NULL }
  };
  const GOptionEntry json_entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctx->json, N_("Print JSON"), NULL },
    { NULL }
  };

  param = vctl_command_synopsis (cmd);
  octx = g_option_context_new (param);
  g_option_context_set_translation_domain (octx, GETTEXT_PACKAGE);
  g_option_context_set_summary (octx, _(cmd->summary));
  if (cmd->description != NULL)
    g_option_context_set_description (octx, _(cmd->description));
  g_option_context_set_strict_posix (octx, stop_at_argument);
  if (entries != NULL)
    g_option_context_add_main_entries (octx, entries, GETTEXT_PACKAGE);
  g_option_context_add_main_entries (octx, common_entries, GETTEXT_PACKAGE);
  if (listing)
    g_option_context_add_main_entries (octx, json_entries, GETTEXT_PACKAGE);

  if (!parse_options (octx, argv, error))
    return FALSE;

  n_args = g_strv_length (*argv) - 1;
  if (n_args < min_args || n_args > max_args) {
    g_set_error (error, VCTL_USAGE_ERROR, 0,
                 _("Usage: vivariumctl %s"), param);
    return FALSE;
  }
  return TRUE;
}

gboolean
vctl_parse_uint (const gchar *option, const gchar *text, guint64 min, guint64 max,
                 guint *out, GError **error)
{
  g_autoptr(GError) error_local = NULL;
  guint64 value = 0;

  if (!g_ascii_string_to_unsigned (text, 10, min, max, &value, &error_local)) {
    g_set_error (error, VCTL_USAGE_ERROR, 0,
                 _("Invalid value for %s: %s"), option, error_local->message);
    return FALSE;
  }
  *out = (guint) value;
  return TRUE;
}

/* Checks done on the client are the same ones the daemon does (they live
 * in common/); they are usage errors here because nothing was sent yet. */
gboolean
vctl_to_usage_error (GError **error)
{
  if (error != NULL && *error != NULL) {
    (*error)->domain = VCTL_USAGE_ERROR;
    (*error)->code = 0;
  }
  return FALSE;
}

/* A D-Bus string must be UTF-8 (GVariant would abort on anything else), and
 * the contract bounds each one; both are the caller's mistake. */
gboolean
vctl_check_text (const gchar *what, const gchar *text, gsize max_bytes, GError **error)
{
  gsize len = strlen (text);

  if (!g_utf8_validate (text, (gssize) len, NULL)) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("%s is not valid UTF-8"), what);
    return FALSE;
  }
  if (len > max_bytes) {
    g_autofree gchar *size = g_strdup_printf ("%" G_GSIZE_FORMAT, len);
    g_autofree gchar *limit = g_strdup_printf ("%" G_GSIZE_FORMAT, max_bytes);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("%s is %s bytes long; the limit is %s"),
                 what, size, limit);
    return FALSE;
  }
  return TRUE;
}

#define VCTL_READ_CHUNK (64 * 1024)

static gboolean
read_fd_bounded (int fd, const gchar *shown, gsize max_bytes, GByteArray *buf, GError **error)
{
  while (buf->len <= max_bytes) {
    guint at = buf->len;
    gssize n;

    g_byte_array_set_size (buf, at + VCTL_READ_CHUNK);
    n = read (fd, buf->data + at, VCTL_READ_CHUNK);
    if (n < 0 && errno == EINTR) {
      g_byte_array_set_size (buf, at);
      continue;
    }
    if (n < 0) {
      int saved = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot read “%s”: %s"),
                   shown, g_strerror (saved));
      return FALSE;
    }
    g_byte_array_set_size (buf, at + (guint) n);
    if (n == 0)
      break;
  }
  return TRUE;
}

/* Reads @path (NULL: standard input) but never more than one chunk past
 * @max_bytes, so an endless or huge input costs no more than that to
 * refuse. The caller tells "too large" by a length over @max_bytes. */
GBytes *
vctl_read_bounded (const gchar *path, gsize max_bytes, GError **error)
{
  g_autoptr(GByteArray) buf = g_byte_array_new ();
  g_autofree gchar *shown = vctl_escape_line (path != NULL ? path : _("standard input"));
  int fd = path != NULL ? open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : STDIN_FILENO;
  gboolean ok;

  if (fd < 0) {
    int saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot open “%s”: %s"),
                 shown, g_strerror (saved));
    return NULL;
  }
  ok = read_fd_bounded (fd, shown, max_bytes, buf, error);
  if (path != NULL)
    close (fd);
  if (!ok)
    return NULL;
  return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
}

/* The same, refusing what is over @max_bytes with a sentence that names
 * the file, the limit and what the limit is for (@what, translated). */
GBytes *
vctl_read_capped (const gchar *path, gsize max_bytes, const gchar *what, GError **error)
{
  g_autoptr(GBytes) data = vctl_read_bounded (path, max_bytes, error);

  if (data == NULL)
    return NULL;
  if (g_bytes_get_size (data) > max_bytes) {
    g_autofree gchar *shown = vctl_escape_line (path != NULL ? path : _("standard input"));
    g_autofree gchar *limit = vivarium_format_size (max_bytes, FALSE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 _("“%s” is larger than %s, the limit for %s"), shown, limit, what);
    return NULL;
  }
  return g_steal_pointer (&data);
}

gboolean
vctl_write_all (FILE *out, const gchar *data, gsize len, GError **error)
{
  if ((len > 0 && fwrite (data, 1, len, out) != len) || fflush (out) != 0) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                         _("Cannot write the command's output"));
    return FALSE;
  }
  return TRUE;
}

/* A document the daemon made (a report) goes to a file or a pipe byte for
 * byte, so that a saved copy still verifies; g_print would convert it to
 * the locale's charset. On a terminal, whatever a worker smuggled into it
 * is shown escaped instead. */
gboolean
vctl_write_for_reader (const gchar *text, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (!isatty (STDOUT_FILENO))
    return vctl_write_all (stdout, text, strlen (text), error);
  shown = vctl_sanitize_text (text);
  if (!vctl_write_all (stdout, shown, strlen (shown), error))
    return FALSE;
  return shown[0] == '\0' || g_str_has_suffix (shown, "\n") || vctl_write_all (stdout, "\n", 1, error);
}

/* One proxy of a child object, without a round trip: properties are read
 * by vctl_ensure_properties() when needed, so that a failure is an error. */
gpointer
vctl_proxy_new (VctlContext *ctx, GType proxy_type, const gchar *interface_name,
                const gchar *path, GError **error)
{
  return g_initable_new (proxy_type, NULL, error,
                         "g-flags", G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                    G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                         "g-name", VIVARIUM_DBUS_NAME,
                         "g-connection", ctx->bus,
                         "g-object-path", path,
                         "g-interface-name", interface_name,
                         NULL);
}

gboolean
vctl_connect (VctlContext *ctx, GError **error)
{
  g_autoptr(GError) error_local = NULL;

  /* Registering the domain now makes the daemon's errors arrive typed. */
  (void) vivarium_call_flags (FALSE);

  if (ctx->host != NULL && !vivarium_remote_check_destination (ctx->host, &error_local)) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, error_local->message);
    return FALSE;
  }
  if (ctx->host != NULL)
    ctx->bus = vivarium_remote_connect_sync (ctx->host, !ctx->no_interaction, NULL, &error_local);
  else
    ctx->bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error_local);
  if (ctx->bus == NULL && ctx->host != NULL) {
    g_set_error_literal (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_SERVER, error_local->message);
    return FALSE;
  }
  if (ctx->bus == NULL) {
    /* A script should see the same kind of name as for any other bus
     * failure, so the local error is given the D-Bus name that means it. */
    g_set_error (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_SERVER,
                 _("Cannot connect to the system bus: %s"), error_local->message);
    return FALSE;
  }
  /* A lost bus must end in an error line, not in SIGTERM. */
  g_dbus_connection_set_exit_on_close (ctx->bus, FALSE);

  /* Only `status` reads the manager's properties; it asks for them. */
  ctx->manager = vivarium_dbus_manager_proxy_new_sync (ctx->bus,
                                                       G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                                       G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                                       VIVARIUM_DBUS_NAME,
                                                       VIVARIUM_DBUS_PATH,
                                                       NULL, error);
  return ctx->manager != NULL;
}

gboolean
vctl_check_local (VctlContext *ctx, const gchar *what, GError **error)
{
  if (ctx->host == NULL)
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
               _("%s passes a file descriptor to the daemon, which cannot travel over SSH; "
                 "run it on %s itself"), what, ctx->host);
  return FALSE;
}

void
vctl_context_clear (VctlContext *ctx)
{
  g_clear_pointer (&ctx->host, g_free);
  g_clear_object (&ctx->manager);
  g_clear_object (&ctx->bus);
}

GDBusCallFlags
vctl_call_flags (VctlContext *ctx)
{
  return vivarium_call_flags (!ctx->no_interaction);
}

gchar **
vctl_list_objects (VctlContext *ctx, VctlListCall list, GError **error)
{
  gchar **paths = NULL;

  if (!list (ctx->manager, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT, &paths, NULL, error))
    return NULL;
  return paths;
}

gchar *
vctl_find_object (VctlContext *ctx, VctlListCall list, const gchar *collection,
                  const gchar *what, const gchar *name, GError **error)
{
  g_autofree gchar *path = vivarium_object_path_for (collection, name);
  g_auto(GStrv) paths = vctl_list_objects (ctx, list, error);

  if (paths == NULL)
    return NULL;
  if (!g_strv_contains ((const gchar * const *) paths, path)) {
    g_autofree gchar *shown = vctl_escape_line (name);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 _("There is no %s called “%s”"), what, shown);
    return NULL;
  }
  return g_steal_pointer (&path);
}

/* Every listing verb: one proxy per object, as JSON (the contract's
 * property names) or as one table row each. */
gboolean
vctl_print_objects (VctlContext *ctx, VctlListCall list, GType proxy_type,
                    const gchar *interface_name, const gchar *header, VctlRowFunc print_row,
                    const gchar *none, GError **error)
{
  g_auto(GStrv) paths = vctl_list_objects (ctx, list, error);
  g_autoptr(JsonArray) array = json_array_new ();

  if (paths == NULL)
    return FALSE;
  if (!ctx->json && paths[0] != NULL)
    g_print ("%s\n", header);
  for (guint i = 0; paths[i] != NULL; i++) {
    g_autoptr(GDBusProxy) proxy = NULL;

    proxy = vctl_proxy_new (ctx, proxy_type, interface_name, paths[i], error);
    if (proxy == NULL || !vctl_ensure_properties (ctx, proxy, error))
      return FALSE;
    if (ctx->json)
      json_array_add_element (array, vctl_proxy_to_json (proxy));
    else
      print_row (proxy);
  }
  if (ctx->json) {
    g_autoptr(JsonNode) root = json_node_init_array (json_node_alloc (), array);
    vctl_print_json (root);
  } else if (paths[0] == NULL) {
    g_print ("%s\n", none);
  }
  return TRUE;
}

/* GDBusProxy swallows a failed GetAll, so the properties are read here
 * instead: a failure is the daemon's real error, not an empty table. */
gboolean
vctl_ensure_properties (VctlContext *ctx, gpointer proxy, GError **error)
{
  GDBusProxy *p = G_DBUS_PROXY (proxy);
  g_auto(GStrv) names = g_dbus_proxy_get_cached_property_names (p);
  g_autoptr(GVariant) ret = NULL;
  g_autoptr(GVariant) props = NULL;
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  if (names != NULL && names[0] != NULL)
    return TRUE;
  ret = g_dbus_connection_call_sync (ctx->bus, VIVARIUM_DBUS_NAME,
                                     g_dbus_proxy_get_object_path (p),
                                     "org.freedesktop.DBus.Properties", "GetAll",
                                     g_variant_new ("(s)", g_dbus_proxy_get_interface_name (p)),
                                     G_VARIANT_TYPE ("(a{sv})"), vctl_call_flags (ctx), -1,
                                     NULL, error);
  if (ret == NULL)
    return FALSE;
  props = g_variant_get_child_value (ret, 0);
  g_variant_iter_init (&iter, props);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_dbus_proxy_set_cached_property (p, key, value);
    g_variant_unref (value);
  }
  return TRUE;
}

/* Cached properties lag behind a method reply (they arrive as signals on a
 * main loop that a sync call does not run), so read the fresh value. */
GVariant *
vctl_get_property (VctlContext *ctx, gpointer proxy, const gchar *property, GError **error)
{
  GDBusProxy *p = G_DBUS_PROXY (proxy);
  g_autoptr(GVariant) ret = NULL;
  GVariant *value = NULL;

  ret = g_dbus_connection_call_sync (ctx->bus, VIVARIUM_DBUS_NAME,
                                     g_dbus_proxy_get_object_path (p),
                                     "org.freedesktop.DBus.Properties", "Get",
                                     g_variant_new ("(ss)", g_dbus_proxy_get_interface_name (p),
                                                    property),
                                     G_VARIANT_TYPE ("(v)"), vctl_call_flags (ctx), -1,
                                     NULL, error);
  if (ret == NULL)
    return NULL;
  g_variant_get (ret, "(v)", &value);
  return value;
}

static gboolean
is_usage_error (const GError *error)
{
  return error->domain == VCTL_USAGE_ERROR || error->domain == G_OPTION_ERROR;
}

static gchar *
error_dbus_name (const GError *error)
{
  if (g_dbus_error_is_remote_error (error))
    return g_dbus_error_get_remote_error (error);
  /* Only domains with registered names; anything else would come out as
   * an "UnmappedGError" name that no script should have to match. */
  if (error->domain == VIVARIUM_ERROR || error->domain == G_DBUS_ERROR)
    return g_dbus_error_encode_gerror (error);
  return NULL;
}

/* One line, always: scripts read the bracketed name, people the sentence. */
gint
vctl_report_error (const GError *error)
{
  g_autofree gchar *sentence = vivarium_call_error_sentence (error);
  g_autofree gchar *name = error_dbus_name (error);
  g_autofree gchar *line = vctl_sanitize_line (sentence);

  if (is_usage_error (error)) {
    g_printerr ("vivariumctl: %s (%s)\n", line, _("see “vivariumctl --help”"));
    return VCTL_EXIT_USAGE;
  }
  if (name != NULL)
    g_printerr ("vivariumctl: %s [%s]\n", line, name);
  else
    g_printerr ("vivariumctl: %s\n", line);
  return VCTL_EXIT_ERROR;
}

gchar *
vctl_escape (const gchar *text)
{
  if (text == NULL)
    return g_strdup ("");
  return vivarium_escape_untrusted (text, strlen (text), G_MAXSIZE, NULL);
}

gchar *
vctl_escape_line (const gchar *text)
{
  return g_strdelimit (vctl_escape (text), "\n\t", ' ');
}

static gboolean
unichar_is_safe (gunichar c)
{
  switch (g_unichar_type (c)) {
  case G_UNICODE_CONTROL:
  case G_UNICODE_FORMAT:       /* bidi overrides reorder what follows */
  case G_UNICODE_UNASSIGNED:
  case G_UNICODE_SURROGATE:
  case G_UNICODE_PRIVATE_USE:
  case G_UNICODE_LINE_SEPARATOR:
  case G_UNICODE_PARAGRAPH_SEPARATOR:
    return FALSE;
  default:
    return TRUE;
  }
}

static void
append_hex (GString *out, const gchar *p, gsize len)
{
  for (gsize i = 0; i < len; i++)
    g_string_append_printf (out, "\\x%02x", (guchar) p[i]);
}

/* Error sentences are for people and may be translated, so printable
 * UTF-8 stays; a control character (from a guest, say) still cannot reach
 * the terminal, and the line stays one line. */
static gchar *
sanitize (const gchar *text, gboolean keep_lines)
{
  GString *out = g_string_new (NULL);
  const gchar *p = text != NULL ? text : "";
  const gchar *end = p + strlen (p);

  while (p < end) {
    gunichar c = g_utf8_get_char_validated (p, end - p);
    gboolean valid = c != (gunichar) -1 && c != (gunichar) -2;
    gsize len = valid ? (gsize) (g_utf8_next_char (p) - p) : 1;

    if (keep_lines && (c == '\n' || c == '\t'))
      g_string_append_c (out, (gchar) c);
    else if (c == '\n' || c == '\t')
      g_string_append_c (out, ' ');
    else if (valid && unichar_is_safe (c))
      g_string_append_len (out, p, (gssize) len);
    else
      append_hex (out, p, len);
    p += len;
  }
  return g_string_free (out, FALSE);
}

gchar *
vctl_sanitize_line (const gchar *text)
{
  return sanitize (text, FALSE);
}

/* The same for text of many lines (a report shown on a terminal): the
 * lines stay, nothing else that could move the cursor does. */
gchar *
vctl_sanitize_text (const gchar *text)
{
  return sanitize (text, TRUE);
}

gchar *
vctl_format_time (guint64 usec)
{
  g_autoptr(GDateTime) utc = NULL;
  g_autoptr(GDateTime) local = NULL;

  if (usec == 0)
    return g_strdup ("-");
  utc = g_date_time_new_from_unix_utc ((gint64) (usec / G_USEC_PER_SEC));
  if (utc == NULL)
    return g_strdup ("?");
  local = g_date_time_to_local (utc);
  return g_date_time_format (local, "%Y-%m-%d %H:%M:%S");
}

gchar *
vctl_format_duration (guint64 usec)
{
  guint64 ms = usec / 1000;

  if (ms < 1000)
    return g_strdup_printf ("%" G_GUINT64_FORMAT " ms", ms);
  if (ms < 60 * 1000)
    return g_strdup_printf ("%.1f s", (gdouble) ms / 1000.0);
  return g_strdup_printf ("%" G_GUINT64_FORMAT "m%02" G_GUINT64_FORMAT "s",
                          ms / 60000, (ms / 1000) % 60);
}

static gint
compare_strings (gconstpointer a, gconstpointer b, gpointer user_data)
{
  return g_strcmp0 (*(const gchar * const *) a, *(const gchar * const *) b);
}

/* The contract's property names are the JSON keys, so scripts and the XML
 * documentation speak the same words. */
JsonNode *
vctl_proxy_to_json (gpointer proxy)
{
  g_auto(GStrv) names = g_dbus_proxy_get_cached_property_names (G_DBUS_PROXY (proxy));
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  if (names != NULL) {
    g_qsort_with_data (names, (gint) g_strv_length (names), sizeof (gchar *),
                       compare_strings, NULL);
    for (guint i = 0; names[i] != NULL; i++) {
      g_autoptr(GVariant) value = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (proxy),
                                                                     names[i]);
      if (value == NULL)
        continue;
      json_builder_set_member_name (builder, names[i]);
      json_builder_add_value (builder, json_gvariant_serialize (value));
    }
  }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

void
vctl_print_json (JsonNode *root)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree gchar *text = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  g_print ("%s\n", text);
}

struct _VctlProgress {
  FILE     *out;
  gboolean  tty;
  gboolean  drawn;
  gchar    *last_step;
};

#define VCTL_BAR_WIDTH 30
#define VCTL_STEP_WIDTH 60

VctlProgress *
vctl_progress_new (FILE *out)
{
  VctlProgress *self = g_new0 (VctlProgress, 1);

  self->out = out;
  self->tty = isatty (fileno (out));
  return self;
}

static void
progress_draw (VctlProgress *self, guint percent, const gchar *step)
{
  gchar bar[VCTL_BAR_WIDTH + 1];
  guint filled = percent * VCTL_BAR_WIDTH / 100;

  memset (bar, '#', filled);
  memset (bar + filled, '-', VCTL_BAR_WIDTH - filled);
  bar[VCTL_BAR_WIDTH] = '\0';
  /* \033[K clears what a longer previous step left on the line. */
  fprintf (self->out, "\r[%s] %3u%% %.*s\033[K", bar, percent, VCTL_STEP_WIDTH, step);
  self->drawn = TRUE;
}

void
vctl_progress_update (VctlProgress *self, guint percent, const gchar *step)
{
  g_autofree gchar *shown = vctl_escape_line (step);

  percent = MIN (percent, 100);
  if (self->tty) {
    progress_draw (self, percent, shown);
  } else if (g_strcmp0 (shown, self->last_step) != 0) {
    fprintf (self->out, "%3u%% %s\n", percent, shown);
    g_free (self->last_step);
    self->last_step = g_steal_pointer (&shown);
  }
  fflush (self->out);
}

void
vctl_progress_end (VctlProgress *self)
{
  if (self->tty && self->drawn) {
    fputc ('\n', self->out);
    fflush (self->out);
  }
  self->drawn = FALSE;
}

void
vctl_progress_free (VctlProgress *self)
{
  vctl_progress_end (self);
  g_free (self->last_step);
  g_free (self);
}

static gboolean
print_guest_output (FILE *out, GVariant *bytes, gboolean raw, GError **error)
{
  gsize len = 0;
  const gchar *data = g_variant_get_fixed_array (bytes, &len, 1);
  g_autofree gchar *escaped = NULL;

  if (raw)
    return vctl_write_all (out, data, len, error);
  escaped = vivarium_escape_untrusted (data, len, G_MAXSIZE, NULL);
  return vctl_write_all (out, escaped, strlen (escaped), error);
}

/* Guest bytes are data. For a person they reach a terminal only escaped,
 * and a pipe gets them raw for stdout only, so that `exec … -- cat f > f`
 * copies exactly. @for_program (a worker's own verbs) gives stdout raw even
 * on a terminal, because a program asked for those bytes; stderr is still
 * escaped there, where a person may be watching. */
gboolean
vctl_print_exec_reply (VctlContext *ctx, gint status, GVariant *out, GVariant *err,
                       gboolean out_truncated, gboolean err_truncated, gboolean for_program,
                       GError **error)
{
  if (!print_guest_output (stdout, out, for_program || !isatty (STDOUT_FILENO), error))
    return FALSE;
  if (!print_guest_output (stderr, err, for_program && !isatty (STDERR_FILENO), error))
    return FALSE;
  if (out_truncated)
    g_printerr (_("vivariumctl: the command's standard output was cut at %d bytes\n"),
                VIVARIUM_OUTPUT_CAP);
  if (err_truncated)
    g_printerr (_("vivariumctl: the command's standard error was cut at %d bytes\n"),
                VIVARIUM_OUTPUT_CAP);
  /* A status a shell cannot carry (a signal, a negative number) must still
   * not look like success. */
  ctx->exit_status = (status >= 0 && status <= 255) ? status : 255;
  return TRUE;
}
