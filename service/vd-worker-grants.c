/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdWorkerGrants"

#include "config.h"

#include "vd-worker-grants.h"

struct _VdWorkerGrants {
  GObject     parent_instance;
  GMutex      lock;
  GHashTable *workers;   /* uid → GHashTable set of "interface\nmethod\npath" */
};

G_DEFINE_TYPE (VdWorkerGrants, vd_worker_grants, G_TYPE_OBJECT)

static void
vd_worker_grants_finalize (GObject *object)
{
  VdWorkerGrants *self = VD_WORKER_GRANTS (object);

  g_hash_table_unref (self->workers);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (vd_worker_grants_parent_class)->finalize (object);
}

static void
vd_worker_grants_class_init (VdWorkerGrantsClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_worker_grants_finalize;
}

static void
vd_worker_grants_init (VdWorkerGrants *self)
{
  g_mutex_init (&self->lock);
  self->workers = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify) g_hash_table_unref);
}

VdWorkerGrants *
vd_worker_grants_new (void)
{
  return g_object_new (VD_TYPE_WORKER_GRANTS, NULL);
}

/* '\n' cannot occur in an interface, member or object path name. */
static gchar *
key_for (const gchar *interface_name, const gchar *method, const gchar *object_path)
{
  return g_strjoin ("\n", interface_name, method, object_path, NULL);
}

void
vd_worker_grants_add_worker (VdWorkerGrants *self, guint32 uid)
{
  g_mutex_lock (&self->lock);
  if (!g_hash_table_contains (self->workers, GUINT_TO_POINTER (uid)))
    g_hash_table_insert (self->workers, GUINT_TO_POINTER (uid),
                         g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL));
  g_mutex_unlock (&self->lock);
}

void
vd_worker_grants_allow (VdWorkerGrants *self, guint32 uid, const gchar *interface_name, const gchar *method,
                        const gchar *object_path)
{
  GHashTable *set;

  vd_worker_grants_add_worker (self, uid);
  g_mutex_lock (&self->lock);
  set = g_hash_table_lookup (self->workers, GUINT_TO_POINTER (uid));
  g_hash_table_add (set, key_for (interface_name, method, object_path));
  g_mutex_unlock (&self->lock);
}

void
vd_worker_grants_remove (VdWorkerGrants *self, guint32 uid)
{
  g_mutex_lock (&self->lock);
  g_hash_table_remove (self->workers, GUINT_TO_POINTER (uid));
  g_mutex_unlock (&self->lock);
}

gboolean
vd_worker_grants_is_worker (VdWorkerGrants *self, guint32 uid)
{
  gboolean known;

  g_mutex_lock (&self->lock);
  known = g_hash_table_contains (self->workers, GUINT_TO_POINTER (uid));
  g_mutex_unlock (&self->lock);
  return known;
}

gboolean
vd_worker_grants_allows (VdWorkerGrants *self, guint32 uid, const gchar *interface_name, const gchar *method,
                         const gchar *object_path)
{
  g_autofree gchar *key = key_for (interface_name, method, object_path);
  GHashTable *set;
  gboolean allowed;

  g_mutex_lock (&self->lock);
  set = g_hash_table_lookup (self->workers, GUINT_TO_POINTER (uid));
  allowed = set != NULL && g_hash_table_contains (set, key);
  g_mutex_unlock (&self->lock);
  return allowed;
}
