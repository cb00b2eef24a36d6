/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The root-only directory that VdSecretStore and VdSshKeyStore keep their
 * files in, one NAME.SUFFIX file per item: the naming rule, the paths, the
 * directory's mode and the bound on how many items it holds, written once
 * for both. */
typedef struct {
  const gchar *suffix;   /* ".secret" */
  const gchar *a_kind;   /* "a secret", for sentences */
  const gchar *kinds;    /* "secrets" */
  guint        max;      /* how many the store may hold */
} VdStoreKind;

/* InvalidArgument unless @name is a variable name (vivarium-secret.h). */
gboolean  vd_store_dir_check_name (const VdStoreKind *kind,
                                   const gchar       *name,
                                   GError           **error);
gchar    *vd_store_dir_path       (const VdStoreKind *kind,
                                   const gchar       *dir,
                                   const gchar       *name);
/* Makes @dir root's and 0700 whatever was there: a store another user
 * could list would tell which hosts have tokens. Failed. */
gboolean  vd_store_dir_prepare    (const gchar       *dir,
                                   GError           **error);
/* The names of the items stored, sorted; files of another suffix or with
 * a name that breaks the rule are not items. Never NULL. */
GStrv     vd_store_dir_names      (const VdStoreKind *kind,
                                   const gchar       *dir);
/* Whether @name may be stored: NoSpace when kind->max items are stored
 * and @name is not one of them (a replacement takes no room). */
gboolean  vd_store_dir_check_room (const VdStoreKind *kind,
                                   const gchar       *dir,
                                   const gchar       *name,
                                   GError           **error);

G_END_DECLS
