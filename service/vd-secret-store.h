/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-secret.h"

G_BEGIN_DECLS

/* The host's secrets (docs/secrets.md): one root-only file per secret in
 * STATE/secrets/ (0700), NAME.secret (0600, vivarium_secrets_save()). It
 * answers Manager.AddSecret, ListSecrets and RemoveSecret itself (connected
 * with vd_secret_store_connect(); the boundary has already asked polkit),
 * and hands a session its secrets with fresh placeholders. No value ever
 * reaches a log, a property or an error. */

#define VD_TYPE_SECRET_STORE (vd_secret_store_get_type ())
G_DECLARE_FINAL_TYPE (VdSecretStore, vd_secret_store, VD, SECRET_STORE, GObject)

VdSecretStore *vd_secret_store_new         (const gchar   *dir);
void           vd_secret_store_connect     (VdSecretStore       *self,
                                            VivariumDBusManager *manager);

/* @secret's placeholder must be NULL; its added_at is set here. Exists
 * unless @replace. */
gboolean       vd_secret_store_add         (VdSecretStore  *self,
                                            VivariumSecret *secret,
                                            gboolean        replace,
                                            GError        **error);
gboolean       vd_secret_store_remove      (VdSecretStore  *self,
                                            const gchar    *name,
                                            GError        **error);
/* Every stored secret, values dropped (NULL), sorted by name. */
GPtrArray     *vd_secret_store_list        (VdSecretStore  *self,
                                            GError        **error);
/* The secrets @names name (at most VIVARIUM_SECRET_MAX_PER_SESSION, no
 * name twice), each with a new placeholder: a session's. NotFound for a
 * name not stored, InvalidArgument for a bad list. */
GPtrArray     *vd_secret_store_for_session (VdSecretStore       *self,
                                            const gchar * const *names,
                                            GError             **error);

G_END_DECLS
