/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gunixfdlist.h>
#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Text from the daemon that came from a guest or a worker is untrusted:
 * shown only in plain-text labels, capped, with control characters made
 * visible. */
#define VIVARIUM_UNTRUSTED_MAX_CHARS 2000

char    *vivarium_plain_text        (const char   *untrusted,
                                     gsize         max_chars);
char    *vivarium_format_uptime     (guint64       started_at_usec);
char    *vivarium_format_time       (guint64       usec);
char    *vivarium_format_duration   (guint64       usec);
void     vivarium_toast             (GtkWidget    *inside,
                                     const char   *text);
void     vivarium_toast_error       (GtkWidget    *inside,
                                     const char   *what,
                                     const GError *error);
gboolean vivarium_permission_usable (GPermission  *permission);
void     vivarium_set_label         (GtkLabel     *label,
                                     const char   *untrusted);

G_END_DECLS

G_BEGIN_DECLS

typedef void (*VivariumCallDone) (GtkWidget *page,
                                  GVariant  *reply,
                                  gpointer   user_data);

void vivarium_name_mnemonic_buttons (GtkWidget *root);
void vivarium_expand_on_select      (GtkListBox *list);

void vivarium_admin_call (GtkWidget        *page,
                          GDBusProxy       *proxy,
                          const char       *method,
                          GVariant         *parameters,
                          GUnixFDList      *fd_list,
                          const char       *what,
                          VivariumCallDone  done,
                          gpointer          user_data);

G_END_DECLS
