/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <gio/gunixfdlist.h>

G_BEGIN_DECLS

#define VD_TYPE_SYSTEMD (vd_systemd_get_type ())
G_DECLARE_FINAL_TYPE (VdSystemd, vd_systemd, VD, SYSTEMD, GObject)

VdSystemd *vd_systemd_new                    (GDBusConnection *connection);
void       vd_systemd_set_connection         (VdSystemd       *self,
                                              GDBusConnection *connection);
gboolean   vd_systemd_subscribe              (VdSystemd       *self,
                                              GError         **error);
void       vd_systemd_start_transient_async  (VdSystemd          *self,
                                              const gchar        *unit,
                                              GVariant           *properties,
                                              GUnixFDList        *fds,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean   vd_systemd_start_transient_finish (VdSystemd     *self,
                                              GAsyncResult  *result,
                                              GError       **error);
gboolean   vd_systemd_start_transient_sync  (VdSystemd     *self,
                                              const gchar   *unit,
                                              GVariant      *properties,
                                              GUnixFDList   *fds,
                                              guint          timeout_ms,
                                              GError       **error);
void       vd_systemd_stop_unit_async        (VdSystemd          *self,
                                              const gchar        *unit,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean   vd_systemd_stop_unit_finish       (VdSystemd     *self,
                                              GAsyncResult  *result,
                                              GError       **error);
gboolean   vd_systemd_stop_unit_sync         (VdSystemd     *self,
                                              const gchar   *unit,
                                              guint          timeout_ms,
                                              GError       **error);
/* KillUnit(@unit, "main", @signal): the unit's main process only; no job,
 * so it returns once systemd has sent the signal. */
void       vd_systemd_kill_unit_async        (VdSystemd          *self,
                                              const gchar        *unit,
                                              gint                signal,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean   vd_systemd_kill_unit_finish       (VdSystemd     *self,
                                              GAsyncResult  *result,
                                              GError       **error);
GVariant  *vd_systemd_get_unit_property      (VdSystemd     *self,
                                              const gchar   *unit,
                                              const gchar   *interface_name,
                                              const gchar   *property,
                                              GError       **error);
gboolean   vd_systemd_unit_is_loaded         (VdSystemd     *self,
                                              const gchar   *unit);
GStrv      vd_systemd_list_units             (VdSystemd     *self,
                                              const gchar   *pattern,
                                              GError       **error);
/* Every property of @interface_name on @unit (a{sv}), or NULL when the unit
 * is not loaded. */
GVariant  *vd_systemd_get_unit_properties    (VdSystemd     *self,
                                              const gchar   *unit,
                                              const gchar   *interface_name,
                                              GError       **error);
/* Keeps what systemd says of @unit's service from now on (its Result, how
 * its main process ended), across reconnects; for telling how a unit that
 * is collected at its end ended. */
guint      vd_systemd_watch_unit             (VdSystemd     *self,
                                              const gchar   *unit);
void       vd_systemd_unwatch_unit           (VdSystemd     *self,
                                              guint          id);
/* "signal, SIGKILL", "exit-code, status 1", "success", or NULL when
 * systemd said nothing of it. */
gchar     *vd_systemd_describe_unit_end      (VdSystemd     *self,
                                              guint          id);
/* systemd's object path of @unit. */
gchar     *vd_systemd_unit_path              (const gchar   *unit);

/* How a service's main process ended, as systemd tells it (its Result,
 * ExecMainCode and ExecMainStatus), gathered from its properties or their
 * PropertiesChanged as they come. Zeroed is "nothing heard". */
typedef struct {
  gchar  *result;
  gint32  code;       /* CLD_EXITED, CLD_KILLED, ... (0: not seen) */
  gint32  status;
} VdServiceEnd;

/* Takes what @props (a{sv} of org.freedesktop.systemd1.Service) says of it. */
void       vd_service_end_take               (VdServiceEnd  *end,
                                              GVariant      *props);
/* "signal, SIGKILL", "exit-code, status 1", "success"; NULL when systemd
 * said nothing. */
gchar     *vd_service_end_describe           (const VdServiceEnd *end);
void       vd_service_end_clear              (VdServiceEnd  *end);
/* A failed unit stays loaded (to be asked why) until this; errors ignored. */
void       vd_systemd_reset_failed_unit      (VdSystemd     *self,
                                              const gchar   *unit);

G_END_DECLS
