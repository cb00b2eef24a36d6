/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-host-list.h"

#include <errno.h>
#include <glib/gi18n.h>

#include "vivarium-remote.h"

#define GROUP "Hosts"
#define KEY   "Destinations"
/* More than anyone manages by hand; a bound on what a file can make us hold. */
#define HOSTS_MAX 64

struct _VivariumHostList {
  GObject    parent_instance;
  char      *path;
  GPtrArray *clients;   /* of VivariumClient; [0] is this computer */
};

static void host_list_model_init (GListModelInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (VivariumHostList, vivarium_host_list, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (G_TYPE_LIST_MODEL, host_list_model_init))

static GType
host_list_get_item_type (GListModel *model)
{
  return VIVARIUM_TYPE_CLIENT;
}

static guint
host_list_get_n_items (GListModel *model)
{
  return VIVARIUM_HOST_LIST (model)->clients->len;
}

static gpointer
host_list_get_item (GListModel *model, guint position)
{
  VivariumHostList *self = VIVARIUM_HOST_LIST (model);

  if (position >= self->clients->len)
    return NULL;
  return g_object_ref (g_ptr_array_index (self->clients, position));
}

static void
host_list_model_init (GListModelInterface *iface)
{
  iface->get_item_type = host_list_get_item_type;
  iface->get_n_items = host_list_get_n_items;
  iface->get_item = host_list_get_item;
}

static VivariumClient *
find (VivariumHostList *self, const char *destination, guint *position)
{
  for (guint i = 1; i < self->clients->len; i++) {
    VivariumClient *client = g_ptr_array_index (self->clients, i);

    if (g_strcmp0 (vivarium_client_get_destination (client), destination) == 0) {
      if (position != NULL)
        *position = i;
      return client;
    }
  }
  return NULL;
}

static gboolean
save (VivariumHostList *self, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (self->path);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  g_autofree char *data = NULL;
  gsize len;

  for (guint i = 1; i < self->clients->len; i++)
    g_ptr_array_add (names, (gpointer) vivarium_client_get_destination (g_ptr_array_index (self->clients, i)));
  g_key_file_set_string_list (kf, GROUP, KEY, (const char * const *) names->pdata, names->len);
  data = g_key_file_to_data (kf, &len, NULL);
  if (g_mkdir_with_parents (dir, 0700) != 0) {
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                 _("Cannot create %s: %s"), dir, g_strerror (errno));
    return FALSE;
  }
  /* A temporary file renamed over the old one: never half a list. */
  return g_file_set_contents_full (self->path, data, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

static void
append (VivariumHostList *self, const char *destination)
{
  g_ptr_array_add (self->clients, vivarium_client_new_remote (destination));
  g_list_model_items_changed (G_LIST_MODEL (self), self->clients->len - 1, 0, 1);
}

/* A missing file is an empty list. The file is the user's, yet text from
 * it is checked as any other destination before ssh sees it. */
gboolean
vivarium_host_list_load (VivariumHostList *self, GError **error)
{
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error_local = NULL;
  g_auto(GStrv) names = NULL;

  if (!g_key_file_load_from_file (kf, self->path, G_KEY_FILE_NONE, &error_local)) {
    if (g_error_matches (error_local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      return TRUE;
    g_propagate_prefixed_error (error, g_steal_pointer (&error_local), "%s: ", self->path);
    return FALSE;
  }
  names = g_key_file_get_string_list (kf, GROUP, KEY, NULL, NULL);
  for (gsize i = 0; names != NULL && names[i] != NULL; i++) {
    g_autoptr(GError) bad = NULL;

    if (self->clients->len > HOSTS_MAX) {
      g_warning ("%s: more than %d hosts; the rest are ignored", self->path, HOSTS_MAX);
      break;
    }
    if (!vivarium_remote_check_destination (names[i], &bad))
      g_warning ("%s: skipped: %s", self->path, bad->message);
    else if (find (self, names[i], NULL) == NULL)
      append (self, names[i]);
  }
  return TRUE;
}

/* Returns the new host's client (owned by the list), or NULL with @error
 * saying what is wrong with @destination. */
VivariumClient *
vivarium_host_list_add (VivariumHostList *self, const char *destination, GError **error)
{
  g_return_val_if_fail (VIVARIUM_IS_HOST_LIST (self), NULL);

  if (!vivarium_remote_check_destination (destination, error))
    return NULL;
  if (find (self, destination, NULL) != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS, _("%s is in the list already."), destination);
    return NULL;
  }
  if (self->clients->len > HOSTS_MAX) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, _("The list holds %d hosts at most."), HOSTS_MAX);
    return NULL;
  }
  append (self, destination);
  if (!save (self, error)) {
    guint last = self->clients->len - 1;

    g_ptr_array_remove_index (self->clients, last);
    g_list_model_items_changed (G_LIST_MODEL (self), last, 1, 0);
    return NULL;
  }
  return g_ptr_array_index (self->clients, self->clients->len - 1);
}

/* This computer is not removed; any other host is, and its link closed. */
gboolean
vivarium_host_list_remove (VivariumHostList *self, VivariumClient *client, GError **error)
{
  guint position = 0;

  g_return_val_if_fail (VIVARIUM_IS_HOST_LIST (self), FALSE);

  if (!vivarium_client_is_remote (client) || find (self, vivarium_client_get_destination (client), &position) != client) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, _("This host is not one that was added."));
    return FALSE;
  }
  g_ptr_array_remove_index (self->clients, position);
  g_list_model_items_changed (G_LIST_MODEL (self), position, 1, 0);
  return save (self, error);
}

VivariumClient *
vivarium_host_list_get_local (VivariumHostList *self)
{
  return g_ptr_array_index (self->clients, 0);
}

static void
vivarium_host_list_finalize (GObject *object)
{
  VivariumHostList *self = VIVARIUM_HOST_LIST (object);

  g_ptr_array_unref (self->clients);
  g_free (self->path);
  G_OBJECT_CLASS (vivarium_host_list_parent_class)->finalize (object);
}

static void
vivarium_host_list_class_init (VivariumHostListClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vivarium_host_list_finalize;
}

static void
vivarium_host_list_init (VivariumHostList *self)
{
  self->clients = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (self->clients, vivarium_client_new ());
}

/* @path: the key file, or NULL for $XDG_CONFIG_HOME/vivarium/hosts.ini. */
VivariumHostList *
vivarium_host_list_new (const char *path)
{
  VivariumHostList *self = g_object_new (VIVARIUM_TYPE_HOST_LIST, NULL);

  self->path = path != NULL ? g_strdup (path)
                            : g_build_filename (g_get_user_config_dir (), "vivarium", "hosts.ini", NULL);
  return self;
}
