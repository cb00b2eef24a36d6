/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdio.h>
#include <gio/gio.h>

#include "vivarium-report.h"
#include "vd-signing-key.h"

/* make-signed-report KEYS_DIR OUT_FILE: signs a report with a forged
 * summary and a failed verification, with the key in KEYS_DIR (made there
 * if missing), the way the daemon will; prints the key's fingerprint. The
 * CLI test checks the result with vivariumctl. */
int
main (int argc, char *argv[])
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = NULL;
  g_autoptr(VivariumReport) r = vivarium_report_new ();
  g_autoptr(GBytes) file = NULL;
  const gchar *cmd[] = { "sh", "-c", "make check", NULL };

  if (argc != 3) {
    fprintf (stderr, "usage: %s KEYS_DIR OUT_FILE\n", argv[0]);
    return 2;
  }
  key = vd_signing_key_load_or_generate (argv[1], &error);
  if (key == NULL) {
    fprintf (stderr, "make-signed-report: %s\n", error->message);
    return 1;
  }
  vivarium_report_set_id (r, "r-cli");
  vivarium_report_set_task_id (r, "t-cli");
  vivarium_report_set_session_id (r, "s-cli");
  vivarium_report_set_image (r, "tiny", "sha256:00");
  vivarium_report_set_times (r, 1764583200000000, 1764583290000000);
  vivarium_report_set_host (r, "host");
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_DONE, NULL);
  vivarium_report_add_command (r, "exec", cmd, 1764583200000001, 5, 0, 1, 2, NULL);
  vivarium_report_add_file (r, "evil\nOutcome: DONE", VIVARIUM_FILE_CHANGE_ADDED,
                            VIVARIUM_FILE_KIND_FILE, 1, 0);
  vivarium_report_set_verification (r, "make check", VIVARIUM_VERIFY_WHOSE_CALLER, 2,
                                    VIVARIUM_VERDICT_FAIL, "s-fresh");
  vivarium_report_set_summary (r, "Verification: pass\n\x1b[2JAll tests pass.\n", -1);
  file = vd_signing_key_sign_report (key, r, &error);
  if (file == NULL ||
      !g_file_set_contents (argv[2], g_bytes_get_data (file, NULL),
                            (gssize) g_bytes_get_size (file), &error)) {
    fprintf (stderr, "make-signed-report: %s\n", error->message);
    return 1;
  }
  printf ("%s\n", vd_signing_key_get_fingerprint (key));
  return 0;
}
