/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "private-bus.h"

GDBusConnection *
private_bus_connect (PrivateBus *pb)
{
  g_autoptr(GError) error = NULL;
  GDBusConnection *c = g_dbus_connection_new_for_address_sync (g_test_dbus_get_bus_address (pb->bus),
                                                               G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                               G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                               NULL, NULL, &error);
  g_assert_no_error (error);
  return c;
}

void
private_bus_up (PrivateBus *pb)
{
  pb->bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (pb->bus);
  pb->service = private_bus_connect (pb);
  pb->client = private_bus_connect (pb);
}

void
private_bus_down (PrivateBus *pb)
{
  g_clear_object (&pb->client);
  g_dbus_connection_close_sync (pb->service, NULL, NULL);
  g_clear_object (&pb->service);
  g_test_dbus_down (pb->bus);
  g_clear_object (&pb->bus);
}
