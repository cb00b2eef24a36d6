/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdTranscript"

#include "config.h"

#include <string.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-transcript.h"

typedef struct {
  gint64    time;
  gchar    *kind;
  gchar    *text;
  gboolean  truncated;
} Entry;

struct _VdTranscript {
  GObject    parent_instance;
  GPtrArray *entries;   /* of Entry */
  gsize      total;     /* bytes of text kept */
  guint64    dropped;
  gboolean   closed;
};

G_DEFINE_TYPE (VdTranscript, vd_transcript, G_TYPE_OBJECT)

static const gchar *const kinds[] = { "model", "tool-call", "tool-result", "failed", "note", NULL };

static void
entry_free (Entry *e)
{
  g_free (e->kind);
  g_free (e->text);
  g_free (e);
}

static void
vd_transcript_finalize (GObject *object)
{
  g_ptr_array_unref (VD_TRANSCRIPT (object)->entries);
  G_OBJECT_CLASS (vd_transcript_parent_class)->finalize (object);
}

static void
vd_transcript_class_init (VdTranscriptClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_transcript_finalize;
}

static void
vd_transcript_init (VdTranscript *self)
{
  self->entries = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_free);
}

static void
append (VdTranscript *self, const gchar *kind, gchar *text, gboolean truncated)
{
  Entry *e = g_new0 (Entry, 1);

  e->time = g_get_real_time ();
  e->kind = g_strdup (kind);
  e->text = text;
  e->truncated = truncated;
  self->total += strlen (text);
  g_ptr_array_add (self->entries, e);
}

/* One slot and some bytes stay free for the marker that says the rest was
 * dropped, so a full transcript still ends by saying it is full. */
void
vd_transcript_add (VdTranscript *self, const gchar *kind, const gchar *text)
{
  gboolean truncated = FALSE;
  g_autofree gchar *shown = vivarium_escape_untrusted (text, strlen (text), VD_TRANSCRIPT_ENTRY_MAX, &truncated);

  if (self->dropped > 0 || self->entries->len + 1 >= VD_TRANSCRIPT_ENTRIES_MAX ||
      self->total + strlen (shown) + 256 > VD_TRANSCRIPT_TOTAL_MAX) {
    if (self->dropped++ == 0)
      append (self, "note", g_strdup ("The transcript reached its cap; later entries were dropped."), TRUE);
    return;
  }
  append (self, kind, g_steal_pointer (&shown), truncated);
}

GVariant *
vd_transcript_to_variant (VdTranscript *self)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(tssb)"));
  for (guint i = 0; i < self->entries->len; i++) {
    Entry *e = g_ptr_array_index (self->entries, i);
    g_variant_builder_add (&b, "(tssb)", (guint64) e->time, e->kind, e->text, e->truncated);
  }
  return g_variant_builder_end (&b);
}

static gboolean
handle_get_transcript (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, VdTranscript *self)
{
  vivarium_dbus_task_complete_get_transcript (iface, invocation, vd_transcript_to_variant (self), self->dropped > 0);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_record (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, const gchar *kind, const gchar *text,
               VdTranscript *self)
{
  if (self->closed) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The task is finishing or finished; its transcript is closed");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!g_strv_contains (kinds, kind)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "A transcript entry's kind is model, tool-call, tool-result, failed or note");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_transcript_add (self, kind, text);
  vivarium_dbus_task_complete_record (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

VdTranscript *
vd_transcript_new (GDBusInterfaceSkeleton *skeleton)
{
  VdTranscript *self = g_object_new (VD_TYPE_TRANSCRIPT, NULL);

  /* The closures hold the transcript: it stays readable as long as the
   * task is on the bus, after the run that filled it is gone. */
  g_signal_connect_data (skeleton, "handle-get-transcript", G_CALLBACK (handle_get_transcript),
                         g_object_ref (self), (GClosureNotify) (void (*) (void)) g_object_unref, 0);
  g_signal_connect_data (skeleton, "handle-record", G_CALLBACK (handle_record),
                         g_object_ref (self), (GClosureNotify) (void (*) (void)) g_object_unref, 0);
  return self;
}

void
vd_transcript_close (VdTranscript *self)
{
  self->closed = TRUE;
}

guint
vd_transcript_get_n_entries (VdTranscript *self)
{
  return self->entries->len;
}

gchar *
vd_transcript_dup_failure (VdTranscript *self)
{
  for (guint i = self->entries->len; i > 0; i--) {
    Entry *e = g_ptr_array_index (self->entries, i - 1);
    if (g_str_equal (e->kind, "failed"))
      return g_utf8_substring (e->text, 0, MIN (g_utf8_strlen (e->text, -1), VD_TRANSCRIPT_REASON_MAX));
  }
  return NULL;
}
