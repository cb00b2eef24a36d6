/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

/* A private dbus-daemon (GTestDBus) with two connections to it: the
 * service's, where a test exports the skeleton it tests, and a client's,
 * which calls it as a caller on the bus would. */
typedef struct {
  GTestDBus       *bus;
  GDBusConnection *service;
  GDBusConnection *client;
} PrivateBus;

void             private_bus_up      (PrivateBus *pb);
void             private_bus_down    (PrivateBus *pb);
/* One more caller, a unique name of its own. */
GDBusConnection *private_bus_connect (PrivateBus *pb);
