/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-report.h"

G_BEGIN_DECLS

/* The daemon's Ed25519 report-signing key, kept in the keys directory
 * (/var/lib/vivarium/keys/ in the daemon) as a PKCS#8 PEM file of mode 0600
 * in a directory of mode 0700. Only the daemon signs; anyone checks with the
 * public key (vivarium_signed_report_verify). */
#define VD_SIGNING_KEY_FILE "report-signing-key.pem"

#define VD_TYPE_SIGNING_KEY (vd_signing_key_get_type ())
G_DECLARE_FINAL_TYPE (VdSigningKey, vd_signing_key, VD, SIGNING_KEY, GObject)

/* Loads the key from @keys_dir, or generates one there (written to a temp
 * file, fsync'ed, renamed into place without replacing a key another
 * process wrote meanwhile). Refuses a key file that is not a regular file
 * owned by this user, or that others may read: that key may have leaked. */
VdSigningKey *vd_signing_key_load_or_generate (const gchar   *keys_dir,
                                               GError       **error);
/* Only loads; G_IO_ERROR_NOT_FOUND when there is no key yet. */
VdSigningKey *vd_signing_key_load             (const gchar   *keys_dir,
                                               GError       **error);
GBytes       *vd_signing_key_sign             (VdSigningKey  *self,
                                               GBytes        *data,
                                               GError       **error);
/* The report's canonical bytes, signed, as the whole signed file: what the
 * daemon stores under reports/ and Report.GetJson() returns. */
GBytes       *vd_signing_key_sign_report      (VdSigningKey   *self,
                                               VivariumReport *report,
                                               GError        **error);
/* The raw 32-byte public key; its base64 (what the signed file and the
 * Manager's property carry); "sha256:<hex>" of the raw key. */
GBytes       *vd_signing_key_get_public_key   (VdSigningKey  *self);
gchar        *vd_signing_key_get_public_key_base64 (VdSigningKey *self);
const gchar  *vd_signing_key_get_fingerprint  (VdSigningKey  *self);

G_END_DECLS
