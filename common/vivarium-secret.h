/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A secret (docs/secrets.md): a value that never enters a guest. The
 * guest holds a placeholder, random per session; the session's egress
 * proxy puts the value in one request header (@header, in @format, where
 * "{}" stands for the value) of requests to the secret's hosts only, and
 * refuses the placeholder anywhere else.
 *
 * - name: an environment variable's name, [A-Za-z_][A-Za-z0-9_]{0,63}
 *   (the guest sees $NAME and /run/vivarium-secrets/NAME).
 * - hosts: 1..VIVARIUM_SECRET_MAX_HOSTS names as an egress rule takes
 *   them, without a port: "api.example.org" or "*.example.org"; no IP
 *   literal (a secret goes to a name whose certificate the proxy checks).
 * - header: an HTTP field name (RFC 9110 token), at most 64 bytes; default
 *   "Authorization".
 * - format: printable ASCII with exactly one "{}", at most 256 bytes;
 *   default "Bearer {}".
 * - value: 1..VIVARIUM_SECRET_MAX_VALUE bytes, printable ASCII or UTF-8
 *   without control characters (it goes into a header line); one trailing
 *   newline of the file it came from is dropped by the daemon, not here.
 * - placeholder: NULL in the store; in a session's file
 *   VIVARIUM_SECRET_PLACEHOLDER_PREFIX + 32 lower-case hex digits.
 *
 * The same file format carries the store's records (one secret, no
 * placeholder; /var/lib/vivarium/secrets/NAME.secret, root 0600) and a
 * session's secrets for its proxy (DIR/secrets, the proxy's uid 0400; the
 * proxy reads it at start and removes it). Never log a value: errors name
 * the secret and the key, never what it holds. */

#define VIVARIUM_SECRET_MAX_VALUE             16384
#define VIVARIUM_SECRET_MAX_HOSTS             16
#define VIVARIUM_SECRET_MAX_PER_SESSION       32
/* How many secrets the host's store may hold (AddSecret: NoSpace past it). */
#define VIVARIUM_SECRET_MAX_STORED            256
#define VIVARIUM_SECRET_PLACEHOLDER_PREFIX    "vivarium-secret-"
#define VIVARIUM_SECRET_PLACEHOLDER_LEN       (16 + 32)
#define VIVARIUM_SECRET_DEFAULT_HEADER        "Authorization"
#define VIVARIUM_SECRET_DEFAULT_FORMAT        "Bearer {}"
/* Where the guest finds its placeholders, one file per secret. */
#define VIVARIUM_SECRET_GUEST_DIR             "/run/vivarium-secrets"

typedef struct {
  gchar  *name;
  GStrv   hosts;
  gchar  *header;
  gchar  *format;
  gchar  *placeholder;
  GBytes *value;
  gint64  added_at;    /* seconds since the epoch */
} VivariumSecret;

gboolean        vivarium_secret_name_is_valid        (const gchar *name);
/* Checks every field as above (the placeholder only when set); G_IO_ERROR
 * INVALID_ARGUMENT with a sentence naming the secret, never its value. */
gboolean        vivarium_secret_check                (const VivariumSecret *secret,
                                                      GError              **error);
VivariumSecret *vivarium_secret_copy                 (const VivariumSecret *secret);
void            vivarium_secret_free                 (VivariumSecret *secret);

/* VIVARIUM_SECRET_PLACEHOLDER_PREFIX + 128 random bits in hex. */
gchar          *vivarium_secret_placeholder_new      (void);
/* TRUE when @host (normalised, as vivarium_egress_normalize_host() gives
 * it) is one of the secret's hosts or below one of its wildcards. */
gboolean        vivarium_secret_applies_to           (const VivariumSecret *secret,
                                                      const gchar          *host);
/* The header's value: @format with "{}" replaced by the value. Wipe it
 * (memset) before freeing. */
gchar          *vivarium_secret_render               (const VivariumSecret *secret);

/* A GKeyFile text, written with vivarium_file_write_durably(); load
 * refuses (G_IO_ERROR naming the path) a file that is not whole (cut short,
 * foreign, over 1 MiB, a link, not regular) or holds a secret that does not
 * pass vivarium_secret_check(). An array of VivariumSecret*, owning them. */
gboolean        vivarium_secrets_save                (GPtrArray    *secrets,
                                                      const gchar  *path,
                                                      gint          mode,
                                                      GError      **error);
GPtrArray      *vivarium_secrets_load                (const gchar  *path,
                                                      GError      **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumSecret, vivarium_secret_free)

G_END_DECLS
