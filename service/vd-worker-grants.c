/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdWorkerGrants"

#include "config.h"

#include "vd-worker-grants.h"

typedef struct {
  gchar      *unit;
  GHashTable *calls;   /* set of "interface\nmethod\npath" */
} Grant;

struct _VdWorkerGrants {
  GObject     parent_instance;
  GMutex      lock;
  guint32     first_uid;
  guint       count;
  GHashTable *workers;   /* uid → Grant */
};

G_DEFINE_TYPE (VdWorkerGrants, vd_worker_grants, G_TYPE_OBJECT)

static void
grant_free (Grant *grant)
{
  g_free (grant->unit);
  g_hash_table_unref (grant->calls);
  g_free (grant);
}

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
  self->workers = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify) grant_free);
}

VdWorkerGrants *
vd_worker_grants_new (guint32 first_uid, guint count)
{
  VdWorkerGrants *self = g_object_new (VD_TYPE_WORKER_GRANTS, NULL);

  self->first_uid = first_uid;
  self->count = count;
  return self;
}

/* '\n' cannot occur in an interface, member or object path name. */
static gchar *
key_for (const gchar *interface_name, const gchar *method, const gchar *object_path)
{
  return g_strjoin ("\n", interface_name, method, object_path, NULL);
}

void
vd_worker_grants_add_worker (VdWorkerGrants *self, guint32 uid, const gchar *unit)
{
  Grant *grant = g_new0 (Grant, 1);

  g_return_if_fail (unit != NULL);
  grant->unit = g_strdup (unit);
  grant->calls = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_lock (&self->lock);
  g_hash_table_replace (self->workers, GUINT_TO_POINTER (uid), grant);
  g_mutex_unlock (&self->lock);
}

void
vd_worker_grants_allow (VdWorkerGrants *self, guint32 uid, const gchar *interface_name, const gchar *method,
                        const gchar *object_path)
{
  Grant *grant;

  g_mutex_lock (&self->lock);
  grant = g_hash_table_lookup (self->workers, GUINT_TO_POINTER (uid));
  if (grant != NULL)
    g_hash_table_add (grant->calls, key_for (interface_name, method, object_path));
  g_mutex_unlock (&self->lock);
  g_warn_if_fail (grant != NULL);
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

  if (uid >= self->first_uid && uid - self->first_uid < self->count)
    return TRUE;
  g_mutex_lock (&self->lock);
  known = g_hash_table_contains (self->workers, GUINT_TO_POINTER (uid));
  g_mutex_unlock (&self->lock);
  return known;
}

gboolean
vd_worker_grants_allows (VdWorkerGrants *self, guint32 uid, const gchar *unit, const gchar *interface_name,
                         const gchar *method, const gchar *object_path)
{
  g_autofree gchar *key = key_for (interface_name, method, object_path);
  Grant *grant;
  gboolean allowed;

  if (unit == NULL)
    return FALSE;
  g_mutex_lock (&self->lock);
  grant = g_hash_table_lookup (self->workers, GUINT_TO_POINTER (uid));
  allowed = grant != NULL && g_str_equal (grant->unit, unit) && g_hash_table_contains (grant->calls, key);
  g_mutex_unlock (&self->lock);
  return allowed;
}
