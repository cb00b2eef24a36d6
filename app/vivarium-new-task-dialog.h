/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_NEW_TASK_DIALOG (vivarium_new_task_dialog_get_type ())
G_DECLARE_FINAL_TYPE (VivariumNewTaskDialog, vivarium_new_task_dialog, VIVARIUM, NEW_TASK_DIALOG, AdwWindow)

/* @project: the project to preselect, or NULL. Emits "submitted" (the new
 * Task's object path) and closes once the service accepted the task. */
VivariumNewTaskDialog *vivarium_new_task_dialog_new (GtkWindow      *parent,
                                                     VivariumClient *client,
                                                     const char     *project);

G_END_DECLS
