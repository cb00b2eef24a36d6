/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdWorkerSlots"

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vivarium-error.h"
#include "vd-worker-slots.h"

typedef struct {
  gboolean taken;
  guint64  released;   /* when it was last given back (a sequence number); 0: never used */
  gchar   *unit;       /* its last tenant's unit, NULL if none */
} Slot;

struct _VdWorkerSlots {
  GObject    parent_instance;
  VdSystemd *systemd;
  gchar     *proc_dir;
  guint32    first_uid;
  guint      count;
  Slot      *slots;
  guint64    sequence;
};

G_DEFINE_TYPE (VdWorkerSlots, vd_worker_slots, G_TYPE_OBJECT)

static void
vd_worker_slots_finalize (GObject *object)
{
  VdWorkerSlots *self = VD_WORKER_SLOTS (object);

  for (guint i = 0; i < self->count; i++)
    g_free (self->slots[i].unit);
  g_free (self->slots);
  g_free (self->proc_dir);
  g_clear_object (&self->systemd);
  G_OBJECT_CLASS (vd_worker_slots_parent_class)->finalize (object);
}

static void
vd_worker_slots_class_init (VdWorkerSlotsClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_worker_slots_finalize;
}

static void
vd_worker_slots_init (VdWorkerSlots *self)
{
}

VdWorkerSlots *
vd_worker_slots_new (VdSystemd *systemd, const gchar *proc_dir, guint32 first_uid, guint count)
{
  VdWorkerSlots *self = g_object_new (VD_TYPE_WORKER_SLOTS, NULL);

  self->systemd = systemd != NULL ? g_object_ref (systemd) : NULL;
  self->proc_dir = g_strdup (proc_dir);
  self->first_uid = first_uid;
  self->count = count;
  self->slots = g_new0 (Slot, count);
  return self;
}

/* "Uid:\treal\teffective\tsaved\tfs": any of them. */
static gboolean
status_has_uid (const gchar *status, guint32 uid)
{
  const gchar *line = strstr (status, "\nUid:");
  g_auto(GStrv) fields = NULL;
  g_autofree gchar *copy = NULL;
  const gchar *end;

  if (line == NULL)
    return FALSE;
  line += strlen ("\nUid:");
  end = strchr (line, '\n');
  copy = g_strndup (line, end != NULL ? (gsize) (end - line) : strlen (line));
  fields = g_strsplit_set (g_strstrip (copy), " \t", -1);
  for (guint i = 0; fields[i] != NULL; i++) {
    gchar *tail = NULL;
    guint64 value;

    if (fields[i][0] == '\0')
      continue;
    value = g_ascii_strtoull (fields[i], &tail, 10);
    if (tail != NULL && *tail == '\0' && value == uid)
      return TRUE;
  }
  return FALSE;
}

/* Reads /proc/<pid>/status, not the directory's owner: a process that made
 * itself non-dumpable shows up as root's there. */
gboolean
vd_worker_slots_uid_has_processes (const gchar *proc_dir, guint32 uid)
{
  g_autoptr(GDir) dir = g_dir_open (proc_dir, 0, NULL);
  const gchar *name;

  if (dir == NULL)
    return TRUE;   /* cannot tell: assume the worst */
  while ((name = g_dir_read_name (dir)) != NULL) {
    g_autofree gchar *path = NULL;
    g_autofree gchar *status = NULL;

    if (name[0] < '0' || name[0] > '9')
      continue;
    path = g_build_filename (proc_dir, name, "status", NULL);
    if (g_file_get_contents (path, &status, NULL, NULL) && status_has_uid (status, uid))
      return TRUE;
  }
  return FALSE;
}

/* Over: not loaded (systemd says so), or loaded and inactive or failed.
 * A systemd that cannot be asked is no answer. */
static gboolean
unit_is_over (VdWorkerSlots *self, const gchar *unit)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) state = NULL;
  g_autofree gchar *remote = NULL;
  const gchar *s;

  if (unit == NULL)
    return TRUE;
  if (self->systemd == NULL)
    return FALSE;
  state = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Unit", "ActiveState", &error);
  if (state == NULL) {
    remote = error != NULL ? g_dbus_error_get_remote_error (error) : NULL;
    return g_strcmp0 (remote, "org.freedesktop.systemd1.NoSuchUnit") == 0;
  }
  if (!g_variant_is_of_type (state, G_VARIANT_TYPE_STRING))
    return FALSE;
  s = g_variant_get_string (state, NULL);
  return g_str_equal (s, "inactive") || g_str_equal (s, "failed");
}

static gboolean
slot_is_clean (VdWorkerSlots *self, guint i)
{
  return unit_is_over (self, self->slots[i].unit) &&
         !vd_worker_slots_uid_has_processes (self->proc_dir, self->first_uid + i);
}

gboolean
vd_worker_slots_claim (VdWorkerSlots *self, const gchar *unit, guint32 *uid, GError **error)
{
  g_autofree guint *order = g_new (guint, self->count);
  guint n = 0;

  /* Free slots, least recently released first (never used: 0). */
  for (guint i = 0; i < self->count; i++) {
    guint j = n++;

    if (self->slots[i].taken) {
      n--;
      continue;
    }
    while (j > 0 && self->slots[order[j - 1]].released > self->slots[i].released) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  for (guint k = 0; k < n; k++) {
    Slot *slot = &self->slots[order[k]];

    if (!slot_is_clean (self, order[k]))
      continue;
    slot->taken = TRUE;
    g_free (slot->unit);
    slot->unit = g_strdup (unit);
    *uid = self->first_uid + order[k];
    return TRUE;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
               "Every worker slot is in use or still holds a process of its last worker (%u slots)", self->count);
  return FALSE;
}

void
vd_worker_slots_release (VdWorkerSlots *self, guint32 uid)
{
  guint i = uid - self->first_uid;

  g_return_if_fail (uid >= self->first_uid && i < self->count);
  self->slots[i].taken = FALSE;
  self->slots[i].released = ++self->sequence;
}
