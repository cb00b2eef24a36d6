/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* What a VivariumProxyList holds: the manager's children of one kind. */
typedef enum {
  VIVARIUM_PROXY_LIST_SESSIONS,  /* VivariumDBusSession, ListSessions, Session{Added,Removed} */
  VIVARIUM_PROXY_LIST_IMAGES,    /* VivariumDBusImage, ListImages, Image{Added,Removed} */
  VIVARIUM_PROXY_LIST_PROJECTS,  /* VivariumDBusProject, ListProjects, Project{Added,Removed} */
  VIVARIUM_PROXY_LIST_TASKS,     /* VivariumDBusTask, ListTasks, TaskAdded, TaskRemoved */
  VIVARIUM_PROXY_LIST_REPORTS,   /* VivariumDBusReport, ListReports, ReportAdded, ReportRemoved */
} VivariumProxyListKind;

/* signal "object-removed" (const char *object_path): the daemon announced
 * the object gone (its *Removed), after its row left the model. */
#define VIVARIUM_TYPE_PROXY_LIST (vivarium_proxy_list_get_type ())
G_DECLARE_FINAL_TYPE (VivariumProxyList, vivarium_proxy_list, VIVARIUM, PROXY_LIST, GObject)

VivariumProxyList *vivarium_proxy_list_new       (GDBusProxy            *manager,
                                                  VivariumProxyListKind  kind);
gboolean           vivarium_proxy_list_is_loaded (VivariumProxyList     *self);
const GError      *vivarium_proxy_list_get_error (VivariumProxyList     *self);
GDBusProxy        *vivarium_proxy_list_lookup    (VivariumProxyList     *self,
                                                  const char            *object_path);

G_END_DECLS
