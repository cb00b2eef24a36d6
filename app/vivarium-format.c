/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-format.h"

#include <glib/gi18n.h>

char *
vivarium_plain_text (const char *untrusted, gsize max_chars)
{
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree char *valid = g_utf8_make_valid (untrusted != NULL ? untrusted : "", -1);
  const char *p = valid;

  for (gsize n = 0; *p != '\0' && n < max_chars; p = g_utf8_next_char (p), n++) {
    gunichar c = g_utf8_get_char (p);

    /* Newlines and tabs keep their meaning; every other control character
     * (escape sequences, bidi overrides) is shown as a code point. */
    if (c == '\n' || c == '\t')
      g_string_append_unichar (out, c);
    else if (g_unichar_iscntrl (c) || g_unichar_type (c) == G_UNICODE_FORMAT)
      g_string_append_printf (out, "\\u%04X", c);
    else
      g_string_append_unichar (out, c);
  }
  if (*p != '\0')
    g_string_append (out, "…");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
vivarium_format_duration (guint64 usec)
{
  guint64 s = usec / G_USEC_PER_SEC;

  if (s < 60)
    return g_strdup_printf (_("%u s"), (guint) s);
  if (s < 3600)
    return g_strdup_printf (_("%u min %u s"), (guint) (s / 60), (guint) (s % 60));
  return g_strdup_printf (_("%u h %u min"), (guint) (s / 3600), (guint) ((s / 60) % 60));
}

/* Connections through the egress proxy mostly last less than a second:
 * "0 s" would say nothing. */
char *
vivarium_format_duration_ms (guint64 msec)
{
  if (msec < 1000)
    return g_strdup_printf (_("%u ms"), (guint) msec);
  if (msec < 10000)
    return g_strdup_printf (_("%.1f s"), msec / 1000.0);
  return vivarium_format_duration (msec * 1000);
}

char *
vivarium_format_uptime (guint64 started_at_usec)
{
  gint64 now = g_get_real_time ();

  if (started_at_usec == 0 || (gint64) started_at_usec > now)
    return g_strdup (_("just started"));
  return vivarium_format_duration (now - started_at_usec);
}

#define DEFINE_PARSE(name, Type, from_string)                                  \
  gint                                                                         \
  name (const char *word)                                                      \
  {                                                                            \
    Type value;                                                                \
    return from_string (word, &value) ? (gint) value : VIVARIUM_STATE_UNKNOWN; \
  }

DEFINE_PARSE (vivarium_parse_session_state, VivariumSessionState, vivarium_session_state_from_string)
DEFINE_PARSE (vivarium_parse_egress_state, VivariumEgressState, vivarium_egress_state_from_string)
DEFINE_PARSE (vivarium_parse_outcome, VivariumOutcome, vivarium_outcome_from_string)
DEFINE_PARSE (vivarium_parse_verdict, VivariumVerdict, vivarium_verdict_from_string)

/* A Task's or a Report's outcome, as both pages say it. */
const char *
vivarium_outcome_label (gint outcome)
{
  switch (outcome) {
  case VIVARIUM_OUTCOME_IN_PROGRESS: return _("In progress");
  case VIVARIUM_OUTCOME_NEEDS_INPUT: return _("Needs input");
  case VIVARIUM_OUTCOME_DONE: return _("Done");
  case VIVARIUM_OUTCOME_FAILED: return _("Failed");
  default: return _("Unknown");
  }
}
