/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-window-state.h"

#include <errno.h>

#define GROUP "Window"
/* A size outside these is not one a window of ours had: ignored. */
#define WINDOW_SIZE_MIN 200
#define WINDOW_SIZE_MAX 16384

static char *
state_path (void)
{
  return g_build_filename (g_get_user_state_dir (), "vivarium", "window.ini", NULL);
}

static gboolean
size_ok (gint v)
{
  return v >= WINDOW_SIZE_MIN && v <= WINDOW_SIZE_MAX;
}

void
vivarium_window_state_restore (GtkWindow *window, AdwViewStack *pages)
{
  g_autofree char *path = state_path ();
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *page = NULL;
  gint width, height;

  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, &error)) {
    if (!g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      g_debug ("%s: %s; the window opens as it does the first time", path, error->message);
    return;
  }
  width = g_key_file_get_integer (kf, GROUP, "width", NULL);
  height = g_key_file_get_integer (kf, GROUP, "height", NULL);
  if (size_ok (width) && size_ok (height))
    gtk_window_set_default_size (window, width, height);
  if (g_key_file_get_boolean (kf, GROUP, "maximized", NULL))
    gtk_window_maximize (window);
  page = g_key_file_get_string (kf, GROUP, "page", NULL);
  /* A page this build does not have (an older or newer app's) is not shown. */
  if (page != NULL && adw_view_stack_get_child_by_name (pages, page) != NULL)
    adw_view_stack_set_visible_child_name (pages, page);
}

void
vivarium_window_state_save (GtkWindow *window, AdwViewStack *pages)
{
  g_autofree char *path = state_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *data = NULL;
  const char *page = adw_view_stack_get_visible_child_name (pages);
  gsize len;
  gint width, height;

  /* GTK 4 keeps the default size at the size the user gave the window; a
   * maximized one keeps the size it had before. */
  gtk_window_get_default_size (window, &width, &height);
  if (size_ok (width) && size_ok (height)) {
    g_key_file_set_integer (kf, GROUP, "width", width);
    g_key_file_set_integer (kf, GROUP, "height", height);
  }
  g_key_file_set_boolean (kf, GROUP, "maximized", gtk_window_is_maximized (window));
  if (page != NULL)
    g_key_file_set_string (kf, GROUP, "page", page);
  data = g_key_file_to_data (kf, &len, NULL);
  /* g_file_set_contents writes a temporary file and renames it: a crash
   * mid-save leaves the old state, never half a file. */
  if (g_mkdir_with_parents (dir, 0700) != 0 ||
      !g_file_set_contents_full (path, data, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &error))
    g_warning ("Could not remember the window’s size and page in %s: %s", path,
               error != NULL ? error->message : g_strerror (errno));
}
