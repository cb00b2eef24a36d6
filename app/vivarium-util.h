/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gunixfdlist.h>
#include <gtk/gtk.h>

#include "vivarium-call.h"
#include "vivarium-format.h"

G_BEGIN_DECLS

void     vivarium_toast             (GtkWidget    *inside,
                                     const char   *text);
void     vivarium_toast_error       (GtkWidget    *inside,
                                     const char   *what,
                                     const GError *error);
gboolean vivarium_permission_usable (GPermission  *permission);
void     vivarium_set_label         (GtkLabel     *label,
                                     const char   *untrusted);

/* A widget that says how long ago something was ("3 minutes ago") is told
 * to say it again each minute, while it exists: @refresh (widget) rewrites
 * its text. Called once at once. */
typedef void (*VivariumRefresh) (GtkWidget *widget);

void     vivarium_refresh_each_minute (GtkWidget       *widget,
                                       VivariumRefresh  refresh);

G_END_DECLS

G_BEGIN_DECLS

typedef void (*VivariumCallDone) (GtkWidget *page,
                                  GVariant  *reply,
                                  gpointer   user_data);

void vivarium_name_mnemonic_buttons (GtkWidget *root);
void vivarium_expand_on_select      (GtkListBox *list);

/* Every admin verb is the generated call with VIVARIUM_ADMIN_CALL (its
 * flags and timeout), vivarium_admin_call_done as its callback and
 * vivarium_admin_call_new (...) as its data: interactive (the desktop's
 * polkit agent may ask for a password), and a refusal becomes a toast that
 * says what and why; @done gets the reply. */
#define VIVARIUM_ADMIN_CALL vivarium_call_flags (TRUE), VIVARIUM_CALL_TIMEOUT_INTERACTIVE

typedef struct _VivariumAdminCall VivariumAdminCall;

VivariumAdminCall *vivarium_admin_call_new  (GtkWidget        *page,
                                             const char       *what,
                                             VivariumCallDone  done,
                                             gpointer          user_data);
void               vivarium_admin_call_done (GObject          *source,
                                             GAsyncResult     *res,
                                             gpointer          call);

G_END_DECLS

G_BEGIN_DECLS

/* The name an item of a proxy list offers, or NULL to leave it out. */
typedef const char *(*VivariumNameOf) (gpointer proxy);

void        vivarium_bind_name_dropdown  (GtkDropDown    *dropdown,
                                          GListModel     *proxies,
                                          VivariumNameOf  name_of,
                                          const char     *preselect);
const char *vivarium_dropdown_get_name   (GtkDropDown    *dropdown);
const char *vivarium_egress_mode_at      (guint           position);

G_END_DECLS
