/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Secrets (docs/secrets.md): the checks of common/vivarium-secret.c, its
 * one file format, and the daemon's store (VdSecretStore) on a temporary
 * directory: modes, Exists, NotFound, values never listed, placeholders
 * fresh per session; and its AddSecret over a private bus, whose calls,
 * answered from a thread, are let go of on every path. */

#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-secret.h"
#include "vd-fs.h"
#include "vd-secret-store.h"
#include "manager-bus.h"

static VivariumSecret *
make_secret (const gchar *name, const gchar *host, const gchar *value)
{
  VivariumSecret *s = g_new0 (VivariumSecret, 1);
  const gchar *hosts[] = { host, NULL };

  s->name = g_strdup (name);
  s->hosts = g_strdupv ((gchar **) hosts);
  s->header = g_strdup (VIVARIUM_SECRET_DEFAULT_HEADER);
  s->format = g_strdup (VIVARIUM_SECRET_DEFAULT_FORMAT);
  s->value = g_bytes_new (value, strlen (value));
  return s;
}

static gboolean
passes (VivariumSecret *s)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = vivarium_secret_check (s, &error);

  if (!ok)
    g_assert_null (strstr (error->message, "hunter2"));   /* a value is never quoted */
  return ok;
}

static void
test_check (void)
{
  g_autoptr(VivariumSecret) s = make_secret ("GH_TOKEN", "api.github.com", "hunter2");
  const gchar *bad_names[] = { "", "1ABC", "A-B", "A B", "ÄB", NULL };
  const gchar *bad_hosts[] = { "api.github.com:443", "10.0.0.1", "[::1]", "API.github.com", "*", "a..b", NULL };
  const gchar *bad_formats[] = { "Bearer", "{}{}", "Bearer {} {}", "Bearer\t{}", NULL };
  const gchar *bad_values[] = { "", "a\nb", "a\rb", "a\001b", "\xff", NULL };
  g_autofree gchar *long_name = g_strnfill (65, 'A');
  g_autofree gchar *long_value = g_strnfill (VIVARIUM_SECRET_MAX_VALUE + 1, 'v');

  g_assert_true (passes (s));
  for (guint i = 0; bad_names[i] != NULL; i++) {
    g_autoptr(VivariumSecret) t = make_secret (bad_names[i], "api.github.com", "hunter2");
    g_assert_false (passes (t));
  }
  {
    g_autoptr(VivariumSecret) t = make_secret (long_name, "api.github.com", "hunter2");
    g_assert_false (passes (t));
    long_name[64] = '\0';
    g_free (t->name);
    t->name = g_strdup (long_name);
    g_assert_true (passes (t));
  }
  for (guint i = 0; bad_hosts[i] != NULL; i++) {
    g_autoptr(VivariumSecret) t = make_secret ("T", bad_hosts[i], "hunter2");
    g_assert_false (passes (t));
  }
  {
    g_autoptr(VivariumSecret) t = make_secret ("T", "*.example.org", "hunter2");
    g_assert_true (passes (t));
  }
  for (guint i = 0; bad_formats[i] != NULL; i++) {
    g_autoptr(VivariumSecret) t = make_secret ("T", "a.example", "hunter2");
    g_free (t->format);
    t->format = g_strdup (bad_formats[i]);
    g_assert_false (passes (t));
  }
  for (guint i = 0; bad_values[i] != NULL; i++) {
    g_autoptr(VivariumSecret) t = make_secret ("T", "a.example", bad_values[i]);
    g_assert_false (passes (t));
  }
  {
    g_autoptr(VivariumSecret) t = make_secret ("T", "a.example", long_value);
    g_assert_false (passes (t));
    g_free (t->header);
    t->header = g_strdup ("Bad Header");
    g_assert_false (passes (t));
  }
}

static void
test_placeholder_and_render (void)
{
  g_autoptr(VivariumSecret) s = make_secret ("T", "*.example.org", "hunter2");
  g_autofree gchar *a = vivarium_secret_placeholder_new ();
  g_autofree gchar *b = vivarium_secret_placeholder_new ();
  g_autofree gchar *rendered = vivarium_secret_render (s);

  g_assert_cmpuint (strlen (a), ==, VIVARIUM_SECRET_PLACEHOLDER_LEN);
  g_assert_true (g_str_has_prefix (a, VIVARIUM_SECRET_PLACEHOLDER_PREFIX));
  g_assert_cmpstr (a, !=, b);
  s->placeholder = g_strdup (a);
  g_assert_true (passes (s));
  s->placeholder[20] = 'X';
  g_assert_false (passes (s));
  g_assert_cmpstr (rendered, ==, "Bearer hunter2");
  g_assert_true (vivarium_secret_applies_to (s, "api.example.org"));
  g_assert_true (vivarium_secret_applies_to (s, "a.b.example.org"));
  g_assert_false (vivarium_secret_applies_to (s, "example.org"));
  g_assert_false (vivarium_secret_applies_to (s, "evilexample.org"));
}

static void
test_file (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vivarium-secret-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "secrets", NULL);
  g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  g_autoptr(GPtrArray) back = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;
  gsize len = 0;
  struct stat st;

  g_ptr_array_add (list, make_secret ("A", "a.example", "value-a"));
  g_ptr_array_add (list, make_secret ("B", "*.b.example", "value b with spaces"));
  ((VivariumSecret *) list->pdata[1])->placeholder = vivarium_secret_placeholder_new ();
  g_assert_true (vivarium_secrets_save (list, path, 0400, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0400);
  back = vivarium_secrets_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->len, ==, 2);
  g_assert_cmpstr (((VivariumSecret *) back->pdata[1])->placeholder, ==,
                   ((VivariumSecret *) list->pdata[1])->placeholder);
  g_assert_true (g_bytes_equal (((VivariumSecret *) back->pdata[1])->value, ((VivariumSecret *) list->pdata[1])->value));
  /* The value is not in the file as it is. */
  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  g_assert_null (strstr (text, "value-a"));
  /* Cut short: no [End], refused. */
  g_chmod (path, 0600);
  g_assert_true (g_file_set_contents (path, text, (gssize) (len / 2), NULL));
  g_clear_pointer (&back, g_ptr_array_unref);
  back = vivarium_secrets_load (path, &error);
  g_assert_null (back);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  vd_fs_rm_rf (dir, NULL);
}

static VivariumSecret *
store_secret (const gchar *name, const gchar *value)
{
  return make_secret (name, "api.example.org", value);
}

static void
test_store (void)
{
  g_autofree gchar *tmp = g_dir_make_tmp ("vivarium-store-XXXXXX", NULL);
  g_autofree gchar *dir = g_build_filename (tmp, "secrets", NULL);
  g_autoptr(VdSecretStore) store = vd_secret_store_new (dir);
  g_autoptr(VivariumSecret) a = store_secret ("A", "first");
  g_autoptr(VivariumSecret) again = store_secret ("A", "second");
  g_autoptr(VivariumSecret) b = store_secret ("B", "bee");
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GPtrArray) one = NULL;
  g_autoptr(GPtrArray) two = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *file = g_build_filename (dir, "A.secret", NULL);
  const gchar *names[] = { "A", NULL };
  const gchar *twice[] = { "A", "A", NULL };
  const gchar *missing[] = { "NOPE", NULL };
  struct stat st;

  g_assert_true (vd_secret_store_add (store, a, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0600);
  g_assert_false (vd_secret_store_add (store, again, FALSE, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_true (vd_secret_store_add (store, again, TRUE, &error));
  g_assert_true (vd_secret_store_add (store, b, FALSE, &error));
  list = vd_secret_store_list (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 2);
  g_assert_cmpstr (((VivariumSecret *) list->pdata[0])->name, ==, "A");
  g_assert_null (((VivariumSecret *) list->pdata[0])->value);
  g_assert_cmpint (((VivariumSecret *) list->pdata[0])->added_at, >, 0);

  one = vd_secret_store_for_session (store, names, &error);
  two = vd_secret_store_for_session (store, names, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (((VivariumSecret *) one->pdata[0])->placeholder, !=, ((VivariumSecret *) two->pdata[0])->placeholder);
  g_assert_cmpmem (g_bytes_get_data (((VivariumSecret *) one->pdata[0])->value, NULL), 6, "second", 6);
  g_assert_null (vd_secret_store_for_session (store, twice, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (vd_secret_store_for_session (store, missing, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (vd_secret_store_remove (store, "A", &error));
  g_assert_false (vd_secret_store_remove (store, "A", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (vd_secret_store_remove (store, "../B", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  vd_fs_rm_rf (tmp, NULL);
}

static GVariant *
add_args (const gchar *name)
{
  const gchar *hosts[] = { "api.example.org", NULL };

  return g_variant_new ("(s^as@a{sv}h)", name, hosts, g_variant_new ("a{sv}", NULL), 0);
}

static void
test_add_over_dbus (void)
{
  g_autofree gchar *tmp = g_dir_make_tmp ("vivarium-store-XXXXXX", NULL);
  g_autofree gchar *dir = g_build_filename (tmp, "secrets", NULL);
  g_autoptr(VdSecretStore) store = vd_secret_store_new (dir);
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GError) error = NULL;
  GVariant *reply;
  ManagerBus mb;

  manager_bus_up (&mb);
  vd_secret_store_connect (store, mb.manager);
  /* Stored (the thread's success), refused as there already (the
   * thread's failure), refused before any thread (a bad name). */
  reply = manager_bus_call_with_fd (&mb, "AddSecret", add_args ("TOKEN"), "hunter2", &error);
  g_assert_no_error (error);
  g_variant_unref (reply);
  g_assert_null (manager_bus_call_with_fd (&mb, "AddSecret", add_args ("TOKEN"), "again", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_null (manager_bus_call_with_fd (&mb, "AddSecret", add_args ("no such name"), "x", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  list = vd_secret_store_list (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 1);
  manager_bus_down (&mb);
  g_assert_cmpuint (mb.calls.received, ==, 3);
  vd_fs_rm_rf (tmp, NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/secret/check", test_check);
  g_test_add_func ("/secret/placeholder-and-render", test_placeholder_and_render);
  g_test_add_func ("/secret/file", test_file);
  g_test_add_func ("/secret/store", test_store);
  g_test_add_func ("/secret/add-over-dbus", test_add_over_dbus);
  return g_test_run ();
}
