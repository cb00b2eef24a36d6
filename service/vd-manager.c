/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdManager"

#include "config.h"

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-daemon.h"
#include "vd-manager.h"

struct _VdManager {
  GObject               parent_instance;
  VdDaemon             *daemon;       /* unowned: the daemon owns us */
  VdConfig             *config;
  VdAuthority          *authority;
  GDBusConnection      *connection;
  VivariumDBusManager  *skeleton;
};

G_DEFINE_TYPE (VdManager, vd_manager, G_TYPE_OBJECT)

static void
vd_manager_finalize (GObject *object)
{
  VdManager *self = VD_MANAGER (object);

  if (self->skeleton != NULL)
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (self->skeleton));
  g_clear_object (&self->skeleton);
  g_clear_object (&self->config);
  g_clear_object (&self->authority);
  g_clear_object (&self->connection);
  G_OBJECT_CLASS (vd_manager_parent_class)->finalize (object);
}

static void
vd_manager_class_init (VdManagerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_manager_finalize;
}

static void
vd_manager_init (VdManager *self)
{
}

static const gchar *
detect_accelerator (void)
{
  /* QEMU opens /dev/kvm in its own unit; the daemon only needs to know
   * whether the kernel offers it. */
  return g_file_test ("/dev/kvm", G_FILE_TEST_EXISTS) ? "kvm" : "tcg";
}

static gboolean
handle_list_sessions (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  const gchar *none[] = { NULL };
  vivarium_dbus_manager_complete_list_sessions (iface, invocation, none);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_images (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  const gchar *none[] = { NULL };
  vivarium_dbus_manager_complete_list_images (iface, invocation, none);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_projects (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  const gchar *none[] = { NULL };
  vivarium_dbus_manager_complete_list_projects (iface, invocation, none);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

VdManager *
vd_manager_new (VdDaemon *daemon, VdConfig *config, VdAuthority *authority, GDBusConnection *connection)
{
  VdManager *self = g_object_new (VD_TYPE_MANAGER, NULL);

  self->daemon = daemon;
  self->config = g_object_ref (config);
  self->authority = g_object_ref (authority);
  self->connection = g_object_ref (connection);
  return self;
}

gboolean
vd_manager_start (VdManager *self, GError **error)
{
  self->skeleton = vivarium_dbus_manager_skeleton_new ();
  vivarium_dbus_manager_set_version (self->skeleton, PACKAGE_VERSION);
  vivarium_dbus_manager_set_state (self->skeleton, "running");
  vivarium_dbus_manager_set_accelerator (self->skeleton, detect_accelerator ());
  g_signal_connect (self->skeleton, "handle-list-sessions", G_CALLBACK (handle_list_sessions), self);
  g_signal_connect (self->skeleton, "handle-list-images", G_CALLBACK (handle_list_images), self);
  g_signal_connect (self->skeleton, "handle-list-projects", G_CALLBACK (handle_list_projects), self);
  vd_authority_protect (self->authority, G_DBUS_INTERFACE_SKELETON (self->skeleton));
  return g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (self->skeleton),
                                           self->connection, VIVARIUM_DBUS_PATH, error);
}

void
vd_manager_shutdown (VdManager *self)
{
  vivarium_dbus_manager_set_state (self->skeleton, "stopping");
}
