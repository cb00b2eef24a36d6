/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The app's host list (app/vivarium-host-list.c): this computer first and
 * never removed, destinations checked before they are kept, the list kept
 * in its key file across instances, a hand-edited file's bad lines
 * skipped. No ssh is run: a host's client connects only when started. */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "vivarium-host-list.h"

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("vivarium-host-list-XXXXXX", &error);
  g_assert_no_error (error);
  /* In a directory not made yet: the list makes it. */
  f->path = g_build_filename (f->dir, "sub", "hosts.ini", NULL);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_autofree char *sub = g_path_get_dirname (f->path);

  g_unlink (f->path);
  g_rmdir (sub);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

static const char *
destination_at (VivariumHostList *list, guint i)
{
  g_autoptr(VivariumClient) client = g_list_model_get_item (G_LIST_MODEL (list), i);

  return vivarium_client_get_destination (client);
}

static void
test_local_first (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumHostList) list = vivarium_host_list_new (f->path);
  g_autoptr(GError) error = NULL;
  VivariumClient *local = vivarium_host_list_get_local (list);

  g_assert_true (vivarium_host_list_load (list, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 1);
  g_assert_false (vivarium_client_is_remote (local));
  g_assert_null (vivarium_client_get_destination (local));
  g_assert_false (vivarium_client_refuse_descriptor (local, NULL));
  g_assert_false (vivarium_host_list_remove (list, local, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 1);
}

static void
test_add_refused (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumHostList) list = vivarium_host_list_new (f->path);
  const char *bad[] = { "", "-oProxyCommand=sh", "user@", "@host", "host name", "a;b", "host:22/x", ".host" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;

    g_assert_null (vivarium_host_list_add (list, bad[i], &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  }
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 1);
  g_assert_false (g_file_test (f->path, G_FILE_TEST_EXISTS));
}

static void
test_persists (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumHostList) list = vivarium_host_list_new (f->path);
  g_autoptr(VivariumHostList) again = vivarium_host_list_new (f->path);
  g_autoptr(VivariumHostList) third = vivarium_host_list_new (f->path);
  g_autoptr(GError) error = NULL;
  VivariumClient *a, *b;

  a = vivarium_host_list_add (list, "alice@build-1.example", &error);
  g_assert_no_error (error);
  g_assert_nonnull (a);
  g_assert_true (vivarium_client_is_remote (a));
  g_assert_cmpstr (vivarium_client_get_display_name (a), ==, "alice@build-1.example");
  g_assert_true (vivarium_client_refuse_descriptor (a, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "cannot travel over SSH"));
  g_clear_error (&error);
  b = vivarium_host_list_add (list, "10.77.0.1", &error);
  g_assert_no_error (error);
  g_assert_null (vivarium_host_list_add (list, "alice@build-1.example", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 3);

  g_assert_true (vivarium_host_list_load (again, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (again)), ==, 3);
  g_assert_null (destination_at (again, 0));
  g_assert_cmpstr (destination_at (again, 1), ==, "alice@build-1.example");
  g_assert_cmpstr (destination_at (again, 2), ==, "10.77.0.1");

  g_assert_true (vivarium_host_list_remove (list, a, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 2);
  g_assert_cmpstr (destination_at (list, 1), ==, vivarium_client_get_destination (b));
  g_assert_true (vivarium_host_list_load (third, &error));
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (third)), ==, 2);
  g_assert_cmpstr (destination_at (third, 1), ==, "10.77.0.1");
}

/* A file edited by hand: what is not a destination is skipped, repeats once. */
static void
test_bad_file (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumHostList) list = vivarium_host_list_new (f->path);
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumHostList) broken = vivarium_host_list_new (f->path);
  g_autofree char *sub = g_path_get_dirname (f->path);

  g_assert_cmpint (g_mkdir_with_parents (sub, 0700), ==, 0);
  g_assert_true (g_file_set_contents (f->path, "[Hosts]\nDestinations=good;-oProxyCommand=sh;good;b@other;\n", -1, NULL));
  g_test_expect_message ("vivarium-app", G_LOG_LEVEL_WARNING, "*skipped*");
  g_assert_true (vivarium_host_list_load (list, &error));
  g_test_assert_expected_messages ();
  g_assert_no_error (error);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 3);
  g_assert_cmpstr (destination_at (list, 1), ==, "good");
  g_assert_cmpstr (destination_at (list, 2), ==, "b@other");

  g_assert_true (g_file_set_contents (f->path, "not a key file", -1, NULL));
  g_assert_false (vivarium_host_list_load (broken, &error));
  g_assert_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/app/host-list/local-first", Fixture, NULL, fixture_setup, test_local_first, fixture_teardown);
  g_test_add ("/app/host-list/add-refused", Fixture, NULL, fixture_setup, test_add_refused, fixture_teardown);
  g_test_add ("/app/host-list/persists", Fixture, NULL, fixture_setup, test_persists, fixture_teardown);
  g_test_add ("/app/host-list/bad-file", Fixture, NULL, fixture_setup, test_bad_file, fixture_teardown);
  return g_test_run ();
}
