/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-egress-entry.h"

#include <glib/gi18n.h>
#include <string.h>

#include "vivarium-format.h"

/* The columns are formatted once, when the entry arrives: a list of a
 * thousand rows is rebuilt often (a refresh, a scroll), the entry never
 * changes. */
struct _VivariumEgressEntry {
  GObject                parent_instance;
  guint64                offset;
  VivariumEgressVerdict  verdict;
  gint64                 time_usec;
  char                  *time;
  char                  *destination;
  char                  *via;
  char                  *reason;
  char                  *bytes;
  char                  *duration;
};

G_DEFINE_FINAL_TYPE (VivariumEgressEntry, vivarium_egress_entry, G_TYPE_OBJECT)

static VivariumEgressVerdict
parse_verdict (const char *verdict)
{
  if (g_strcmp0 (verdict, "allowed") == 0) return VIVARIUM_EGRESS_VERDICT_ALLOWED;
  if (g_strcmp0 (verdict, "denied") == 0) return VIVARIUM_EGRESS_VERDICT_DENIED;
  if (g_strcmp0 (verdict, "log-full") == 0) return VIVARIUM_EGRESS_VERDICT_LOG_FULL;
  return VIVARIUM_EGRESS_VERDICT_UNKNOWN;
}

/* "deb.debian.org:443", "[2001:db8::1]:443": an IPv6 literal's colons
 * would run into the port's. */
static char *
format_destination (const char *untrusted_host, guint16 port)
{
  g_autofree char *host = vivarium_plain_text (untrusted_host, VIVARIUM_EGRESS_HOST_MAX_CHARS);

  if (*host == '\0')
    return g_strdup_printf (_("(no host):%u"), port);
  if (strchr (host, ':') != NULL && host[0] != '[')
    return g_strdup_printf ("[%s]:%u", host, port);
  return g_strdup_printf ("%s:%u", host, port);
}

static char *
format_bytes (guint64 up, guint64 down)
{
  g_autofree char *up_text = vivarium_format_size (up, FALSE);
  g_autofree char *down_text = vivarium_format_size (down, FALSE);

  /* TRANSLATORS: bytes the guest sent, then bytes it received. */
  return g_strdup_printf (_("%s up · %s down"), up_text, down_text);
}

VivariumEgressEntry *
vivarium_egress_entry_new (GVariant *entry, guint64 offset)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (entry);
  VivariumEgressEntry *self = g_object_new (VIVARIUM_TYPE_EGRESS_ENTRY, NULL);
  const char *host = "", *via = "", *verdict = "", *reason = "";
  gint64 time = 0;
  guint16 port = 0;
  guint64 up = 0, down = 0, duration_ms = 0;

  /* A missing or mistyped key reads as its zero: the row says less, never
   * something else. */
  g_variant_dict_lookup (dict, "time", "x", &time);
  g_variant_dict_lookup (dict, "host", "&s", &host);
  g_variant_dict_lookup (dict, "port", "q", &port);
  g_variant_dict_lookup (dict, "via", "&s", &via);
  g_variant_dict_lookup (dict, "verdict", "&s", &verdict);
  g_variant_dict_lookup (dict, "reason", "&s", &reason);
  g_variant_dict_lookup (dict, "bytes-up", "t", &up);
  g_variant_dict_lookup (dict, "bytes-down", "t", &down);
  g_variant_dict_lookup (dict, "duration-ms", "t", &duration_ms);

  self->offset = offset;
  self->verdict = parse_verdict (verdict);
  /* A decision has a time; none (0) is not "never" but unknown. */
  self->time_usec = time > 0 ? time : -1;
  self->time = vivarium_time_exact (self->time_usec);
  self->destination = format_destination (host, port);
  self->via = vivarium_plain_text (via, 16);
  self->reason = vivarium_plain_text (reason, VIVARIUM_EGRESS_REASON_MAX_CHARS);
  self->bytes = format_bytes (up, down);
  self->duration = vivarium_format_duration_ms (duration_ms);
  return self;
}

guint64
vivarium_egress_entry_get_offset (VivariumEgressEntry *self)
{
  return self->offset;
}

VivariumEgressVerdict
vivarium_egress_entry_get_verdict (VivariumEgressEntry *self)
{
  return self->verdict;
}

/* Said in words: the colour of the badge only repeats it. */
const char *
vivarium_egress_entry_get_verdict_label (VivariumEgressEntry *self)
{
  switch (self->verdict) {
  case VIVARIUM_EGRESS_VERDICT_ALLOWED: return _("Allowed");
  case VIVARIUM_EGRESS_VERDICT_DENIED: return _("Denied");
  case VIVARIUM_EGRESS_VERDICT_LOG_FULL: return _("Log full");
  case VIVARIUM_EGRESS_VERDICT_UNKNOWN:
  default: return _("Unknown verdict");
  }
}

const char *
vivarium_egress_entry_get_verdict_class (VivariumEgressEntry *self)
{
  switch (self->verdict) {
  case VIVARIUM_EGRESS_VERDICT_ALLOWED: return "success";
  case VIVARIUM_EGRESS_VERDICT_DENIED: return "error";
  case VIVARIUM_EGRESS_VERDICT_LOG_FULL: return "warning";
  case VIVARIUM_EGRESS_VERDICT_UNKNOWN:
  default: return "dim-label";
  }
}

/* When the proxy decided, µs since the epoch; -1 when it did not say. */
gint64
vivarium_egress_entry_get_time_usec (VivariumEgressEntry *self)
{
  return self->time_usec;
}

/* The exact local time, or "unknown". */
const char *
vivarium_egress_entry_get_time (VivariumEgressEntry *self)
{
  return self->time;
}

const char *
vivarium_egress_entry_get_destination (VivariumEgressEntry *self)
{
  return self->destination;
}

const char *
vivarium_egress_entry_get_via (VivariumEgressEntry *self)
{
  return self->via;
}

const char *
vivarium_egress_entry_get_reason (VivariumEgressEntry *self)
{
  return self->reason;
}

const char *
vivarium_egress_entry_get_bytes (VivariumEgressEntry *self)
{
  return self->bytes;
}

const char *
vivarium_egress_entry_get_duration (VivariumEgressEntry *self)
{
  return self->duration;
}

static void
vivarium_egress_entry_finalize (GObject *object)
{
  VivariumEgressEntry *self = VIVARIUM_EGRESS_ENTRY (object);

  g_free (self->time);
  g_free (self->destination);
  g_free (self->via);
  g_free (self->reason);
  g_free (self->bytes);
  g_free (self->duration);
  G_OBJECT_CLASS (vivarium_egress_entry_parent_class)->finalize (object);
}

static void
vivarium_egress_entry_class_init (VivariumEgressEntryClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vivarium_egress_entry_finalize;
}

static void
vivarium_egress_entry_init (VivariumEgressEntry *self)
{
}
