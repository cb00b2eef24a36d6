/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Every refusal the daemon sends is one of these; each maps to a registered
 * D-Bus error name org.vivarium.Vivarium1.Error.<Code>, so clients get a
 * typed error back and never have to parse a message. */
typedef enum {
  VIVARIUM_ERROR_FAILED,            /* Failed */
  VIVARIUM_ERROR_INVALID_ARGUMENT,  /* InvalidArgument */
  VIVARIUM_ERROR_NOT_AUTHORIZED,    /* NotAuthorized */
  VIVARIUM_ERROR_NOT_FOUND,         /* NotFound */
  VIVARIUM_ERROR_EXISTS,            /* Exists */
  VIVARIUM_ERROR_BUSY,              /* Busy */
  VIVARIUM_ERROR_NOT_FROZEN,        /* NotFrozen */
  VIVARIUM_ERROR_DIGEST_MISMATCH,   /* DigestMismatch */
  VIVARIUM_ERROR_BAD_STATE,         /* BadState */
  VIVARIUM_ERROR_TOO_LARGE,         /* TooLarge */
  VIVARIUM_ERROR_TIMED_OUT,         /* TimedOut */
  VIVARIUM_ERROR_GUEST,             /* Guest */
  VIVARIUM_ERROR_GUARD_UNAVAILABLE, /* GuardUnavailable */
  VIVARIUM_ERROR_NOT_SUPPORTED,     /* NotSupported */
  VIVARIUM_ERROR_CANCELLED,         /* Cancelled */
  VIVARIUM_ERROR_PROTOCOL,          /* Protocol */
  VIVARIUM_ERROR_NO_SPACE,          /* NoSpace */
} VivariumError;

#define VIVARIUM_N_ERRORS (VIVARIUM_ERROR_NO_SPACE + 1)
#define VIVARIUM_ERROR (vivarium_error_quark ())

GQuark       vivarium_error_quark          (void);
const gchar *vivarium_error_code_to_name   (VivariumError code);
gboolean     vivarium_error_is_remote      (const GError *error);
void         vivarium_error_strip_remote   (GError *error);
void         vivarium_error_convert        (GError **error);

G_END_DECLS
