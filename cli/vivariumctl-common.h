/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <json-glib/json-glib.h>

#include "vivarium-call.h"
#include "vivarium-dbus-generated.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-size.h"
#include "vivarium-state.h"
#include "vivarium-user.h"

G_BEGIN_DECLS

/* Usage errors are the caller's mistake, not the daemon's: they exit with 2
 * and are found before anything is sent on the bus. */
#define VCTL_USAGE_ERROR (vctl_usage_error_quark ())
GQuark vctl_usage_error_quark (void);

#define VCTL_EXIT_ERROR 1
#define VCTL_EXIT_USAGE 2

/* How long a call may take when the daemon bounds the work itself (a boot,
 * a copy, a self-test): the daemon answers with TimedOut, so the client
 * must not give up first. */
#define VCTL_TIMEOUT_LONG VIVARIUM_CALL_TIMEOUT_LONG
#define VCTL_TIMEOUT_FILE (120 * 1000)

/* Seconds a guest command may run when --timeout is not given. */
#define VCTL_EXEC_TIMEOUT_DEFAULT 600

/* Reports are named in DESIGN.md but not yet in common/vivarium-names.h;
 * the daemon's definition wins once it is there. */
/* The task contract's bounds, checked here so that a refusal needs no
 * daemon, are the daemon's own: VIVARIUM_TASK_* in common/vivarium-names.h. */

#ifndef VIVARIUM_DBUS_PATH_REPORTS
#define VIVARIUM_DBUS_PATH_REPORTS VIVARIUM_DBUS_PATH "/reports"
#endif

typedef struct {
  gboolean             json;
  gboolean             no_interaction;
  gchar               *host;      /* --host [USER@]HOST: its bus over SSH */
  GDBusConnection     *bus;
  VivariumDBusManager *manager;
  /* Set by commands whose success still ends in a non-zero status (exec). */
  gint                 exit_status;
} VctlContext;

typedef struct _VctlCommand VctlCommand;
typedef gboolean (*VctlCommandFunc) (VctlContext        *ctx,
                                     const VctlCommand  *cmd,
                                     gchar            ***argv,
                                     GError            **error);

struct _VctlCommand {
  const gchar     *group;      /* NULL for a top-level verb */
  const gchar     *verb;
  const gchar     *arguments;  /* e.g. "RECIPE NAME" */
  const gchar     *summary;
  VctlCommandFunc  func;
  const gchar     *description;  /* shown after the options in --help, or NULL */
};

gchar       *vctl_command_synopsis   (const VctlCommand    *cmd);
gboolean     vctl_parse_args         (VctlContext          *ctx,
                                      const VctlCommand    *cmd,
                                      const GOptionEntry   *entries,
                                      gboolean              listing,
                                      gchar              ***argv,
                                      guint                 min_args,
                                      guint                 max_args,
                                      GError              **error);
gboolean     vctl_parse_args_full    (VctlContext          *ctx,
                                      const VctlCommand    *cmd,
                                      const GOptionEntry   *entries,
                                      gboolean              listing,
                                      gboolean              stop_at_argument,
                                      gchar              ***argv,
                                      guint                 min_args,
                                      guint                 max_args,
                                      GError              **error);
gboolean     vctl_to_usage_error     (GError              **error);
gboolean     vctl_check_text         (const gchar          *what,
                                      const gchar          *text,
                                      gsize                 max_bytes,
                                      GError              **error);
GBytes      *vctl_read_bounded       (const gchar          *path,
                                      gsize                 max_bytes,
                                      GError              **error);
GBytes      *vctl_read_capped        (const gchar          *path,
                                      gsize                 max_bytes,
                                      const gchar          *what,
                                      GError              **error);
gboolean     vctl_write_all          (FILE                 *out,
                                      const gchar          *data,
                                      gsize                 len,
                                      GError              **error);
gboolean     vctl_print_exec_reply   (VctlContext          *ctx,
                                      gint                  status,
                                      GVariant             *out,
                                      GVariant             *err,
                                      gboolean              out_truncated,
                                      gboolean              err_truncated,
                                      gboolean              for_program,
                                      GError              **error);
gboolean     vctl_write_for_reader   (const gchar          *text,
                                      GError              **error);
gpointer     vctl_proxy_new          (VctlContext          *ctx,
                                      GType                 proxy_type,
                                      const gchar          *interface_name,
                                      const gchar          *path,
                                      GError              **error);
gboolean     vctl_parse_uint         (const gchar          *option,
                                      const gchar          *text,
                                      guint64               min,
                                      guint64               max,
                                      guint                *out,
                                      GError              **error);
gboolean     vctl_connect            (VctlContext          *ctx,
                                      GError              **error);
void         vctl_context_clear      (VctlContext          *ctx);
/* Before a call that passes a descriptor (@what names the verb): refused
 * with --host, where no descriptor can travel. */
gboolean     vctl_check_local        (VctlContext          *ctx,
                                      const gchar          *what,
                                      GError              **error);
GDBusCallFlags vctl_call_flags     (VctlContext          *ctx);
/* One of the Manager's List* calls, e.g.
 * vivarium_dbus_manager_call_list_sessions_sync. */
typedef gboolean (*VctlListCall) (VivariumDBusManager  *manager,
                                  GDBusCallFlags        call_flags,
                                  gint                  timeout_msec,
                                  gchar              ***out_paths,
                                  GCancellable         *cancellable,
                                  GError              **error);
gchar       *vctl_find_object        (VctlContext          *ctx,
                                      VctlListCall          list,
                                      const gchar          *collection,
                                      const gchar          *what,
                                      const gchar          *name,
                                      GError              **error);
gchar      **vctl_list_objects       (VctlContext          *ctx,
                                      VctlListCall          list,
                                      GError              **error);
typedef void (*VctlRowFunc) (gpointer proxy);
gboolean     vctl_print_objects      (VctlContext          *ctx,
                                      VctlListCall          list,
                                      GType                 proxy_type,
                                      const gchar          *interface_name,
                                      const gchar          *header,
                                      VctlRowFunc           print_row,
                                      const gchar          *none,
                                      GError              **error);
gboolean     vctl_ensure_properties  (VctlContext          *ctx,
                                      gpointer              proxy,
                                      GError              **error);
GVariant    *vctl_get_property       (VctlContext          *ctx,
                                      gpointer              proxy,
                                      const gchar          *property,
                                      GError              **error);
gint         vctl_report_error       (const GError         *error);

/* Formatting: every string that came over the bus is shown escaped. */
gchar       *vctl_escape             (const gchar          *text);
gchar       *vctl_escape_line        (const gchar          *text);
gchar       *vctl_sanitize_line      (const gchar          *text);
gchar       *vctl_sanitize_text      (const gchar          *text);
gchar       *vctl_format_time        (guint64               usec);
gchar       *vctl_format_duration    (guint64               usec);
JsonNode    *vctl_proxy_to_json      (gpointer              proxy);
void         vctl_print_json         (JsonNode             *root);

/* Progress of long work: a bar on a terminal, one line per step otherwise. */
typedef struct _VctlProgress VctlProgress;
VctlProgress *vctl_progress_new      (FILE                 *out);
void          vctl_progress_update   (VctlProgress         *self,
                                      guint                 percent,
                                      const gchar          *step);
void          vctl_progress_end      (VctlProgress         *self);
void          vctl_progress_free     (VctlProgress         *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VctlProgress, vctl_progress_free)

G_END_DECLS
