/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <unistd.h>

#include "vivarium-user.h"

/* Large enough for any passwd entry NSS hands back; a larger one (ERANGE)
 * is shown as its number. */
#define PASSWD_BUF_MAX (64 * 1024)

gchar *
vivarium_format_uid (guint32 uid)
{
  long suggested = sysconf (_SC_GETPW_R_SIZE_MAX);
  gsize len = suggested > 0 ? (gsize) suggested : 1024;
  struct passwd pw, *found = NULL;

  for (; len <= PASSWD_BUF_MAX; len *= 2) {
    g_autofree gchar *buf = g_malloc (len);
    int err = getpwuid_r ((uid_t) uid, &pw, buf, len, &found);

    if (err == 0 && found != NULL && found->pw_name != NULL && found->pw_name[0] != '\0')
      return g_strdup_printf ("%s (%u)", found->pw_name, uid);
    if (err != ERANGE)
      break;
  }
  return g_strdup_printf ("%u", uid);
}
