/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-prefix-stream.h"

struct _VivariumEgressPrefixStream {
  GInputStream  parent;
  GBytes       *prefix;
  gsize         offset;   /* of the prefix, given out */
  GInputStream *base;
};

static void pollable_iface_init (GPollableInputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (VivariumEgressPrefixStream, vivarium_egress_prefix_stream, G_TYPE_INPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM, pollable_iface_init))

static gsize
prefix_left (VivariumEgressPrefixStream *self)
{
  return g_bytes_get_size (self->prefix) - self->offset;
}

static gssize
take_prefix (VivariumEgressPrefixStream *self, void *buffer, gsize count)
{
  gsize n = MIN (count, prefix_left (self));

  memcpy (buffer, (const guint8 *) g_bytes_get_data (self->prefix, NULL) + self->offset, n);
  self->offset += n;
  return (gssize) n;
}

static gssize
prefix_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (stream);

  if (prefix_left (self) > 0)
    return take_prefix (self, buffer, count);
  return g_input_stream_read (self->base, buffer, count, cancellable, error);
}

static gboolean
prefix_can_poll (GPollableInputStream *stream)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (stream);

  return G_IS_POLLABLE_INPUT_STREAM (self->base) &&
         g_pollable_input_stream_can_poll (G_POLLABLE_INPUT_STREAM (self->base));
}

static gboolean
prefix_is_readable (GPollableInputStream *stream)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (stream);

  return prefix_left (self) > 0 || g_pollable_input_stream_is_readable (G_POLLABLE_INPUT_STREAM (self->base));
}

static GSource *
prefix_create_source (GPollableInputStream *stream, GCancellable *cancellable)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (stream);
  g_autoptr(GSource) child = NULL;

  /* Bytes in hand are readable at once. */
  if (prefix_left (self) > 0)
    child = g_timeout_source_new (0);
  else
    child = g_pollable_input_stream_create_source (G_POLLABLE_INPUT_STREAM (self->base), cancellable);
  return g_pollable_source_new_full (stream, child, cancellable);
}

static gssize
prefix_read_nonblocking (GPollableInputStream *stream, void *buffer, gsize count, GError **error)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (stream);

  if (prefix_left (self) > 0)
    return take_prefix (self, buffer, count);
  return g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (self->base), buffer, count, NULL, error);
}

static void
pollable_iface_init (GPollableInputStreamInterface *iface)
{
  iface->can_poll = prefix_can_poll;
  iface->is_readable = prefix_is_readable;
  iface->create_source = prefix_create_source;
  iface->read_nonblocking = prefix_read_nonblocking;
}

static void
prefix_finalize (GObject *object)
{
  VivariumEgressPrefixStream *self = VIVARIUM_EGRESS_PREFIX_STREAM (object);

  g_bytes_unref (self->prefix);
  g_object_unref (self->base);
  G_OBJECT_CLASS (vivarium_egress_prefix_stream_parent_class)->finalize (object);
}

static void
vivarium_egress_prefix_stream_class_init (VivariumEgressPrefixStreamClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = prefix_finalize;
  G_INPUT_STREAM_CLASS (klass)->read_fn = prefix_read;
}

static void
vivarium_egress_prefix_stream_init (VivariumEgressPrefixStream *self)
{
}

GInputStream *
vivarium_egress_prefix_stream_new (GBytes *prefix, GInputStream *base)
{
  VivariumEgressPrefixStream *self = g_object_new (VIVARIUM_TYPE_EGRESS_PREFIX_STREAM, NULL);

  self->prefix = g_bytes_ref (prefix);
  self->base = g_object_ref (base);
  return G_INPUT_STREAM (self);
}
