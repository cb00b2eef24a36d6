/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host's SSH keys (docs/secrets.md, "SSH keys"): VdSshKeyStore's
 * AddSshKey over a private bus with a key ssh-keygen made, and the ways it
 * refuses one. Each call is answered from a thread or at once, and let go
 * of on every path (the tear-down counts the live invocations). */

#include "config.h"

#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"
#include "vd-ssh-key-store.h"
#include "manager-bus.h"

/* A fresh unencrypted ed25519 key in @dir: its private file's text, and
 * the "type base64" of its public half in *public_key. */
static gchar *
make_key (const gchar *dir, gchar **public_key)
{
  g_autofree gchar *path = g_build_filename (dir, "id", NULL);
  g_autofree gchar *pub_path = g_strconcat (path, ".pub", NULL);
  const gchar *argv[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", path, NULL };
  g_autoptr(GError) error = NULL;
  g_autofree gchar *pub = NULL;
  g_auto(GStrv) fields = NULL;
  gchar *private_key = NULL;
  gint status = 0;

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDIN_FROM_DEV_NULL, NULL,
                               NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_true (g_file_get_contents (path, &private_key, NULL, &error));
  g_assert_true (g_file_get_contents (pub_path, &pub, NULL, &error));
  fields = g_strsplit (pub, " ", 3);
  *public_key = g_strdup_printf ("%s %s", fields[0], fields[1]);
  return private_key;
}

static GVariant *
add_args (const gchar *name)
{
  return g_variant_new ("(s@a{sv}h)", name, g_variant_new ("a{sv}", NULL), 0);
}

static void
assert_refused (ManagerBus *mb, const gchar *name, const gchar *contents, gint code)
{
  g_autoptr(GError) error = NULL;

  g_assert_null (manager_bus_call_with_fd (mb, "AddSshKey", add_args (name), contents, &error));
  g_assert_error (error, VIVARIUM_ERROR, code);
}

static void
test_add_over_dbus (void)
{
  g_autofree gchar *tmp = g_dir_make_tmp ("vivarium-keys-XXXXXX", NULL);
  g_autofree gchar *dir = g_build_filename (tmp, "secrets", NULL);
  g_autoptr(VdSshKeyStore) store = vd_ssh_key_store_new (dir);
  g_autofree gchar *public_key = NULL;
  g_autofree gchar *private_key = make_key (tmp, &public_key);
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GError) error = NULL;
  GVariant *reply;
  ManagerBus mb;

  manager_bus_up (&mb);
  vd_ssh_key_store_connect (store, mb.manager);
  reply = manager_bus_call_with_fd (&mb, "AddSshKey", add_args ("deploy"), private_key, &error);
  g_assert_no_error (error);
  g_variant_unref (reply);
  /* There already (the thread's failure); ssh-keygen refuses it (the
   * thread's, later); a bad name (before any thread); no key header. */
  assert_refused (&mb, "deploy", private_key, VIVARIUM_ERROR_EXISTS);
  assert_refused (&mb, "broken", VIVARIUM_SSH_KEY_PEM_BEGIN "\nnot base64\n", VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused (&mb, "no such name", private_key, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused (&mb, "plain", "hunter2", VIVARIUM_ERROR_INVALID_ARGUMENT);
  list = vd_ssh_key_store_list (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 1);
  g_assert_cmpstr (((VivariumSshKey *) list->pdata[0])->name, ==, "deploy");
  g_assert_cmpstr (((VivariumSshKey *) list->pdata[0])->public_key, ==, public_key);
  manager_bus_down (&mb);
  g_assert_cmpuint (mb.calls.received, ==, 5);
  vd_fs_rm_rf (tmp, NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ssh-key-store/add-over-dbus", test_add_over_dbus);
  return g_test_run ();
}
