/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-dbus-generated.h"
#include "invocation-watch.h"
#include "private-bus.h"

/* A Manager skeleton on a private bus, for a store's handlers: a test
 * connects them, calls over a second connection, and the tear-down checks
 * that every call was let go of. */
typedef struct {
  PrivateBus           pb;
  VivariumDBusManager *manager;
  InvocationWatch      calls;
} ManagerBus;

void      manager_bus_up           (ManagerBus   *mb);
void      manager_bus_down         (ManagerBus   *mb);
GVariant *manager_bus_call_with_fd (ManagerBus   *mb,
                                    const gchar  *method,
                                    GVariant     *args,
                                    const gchar  *fd_contents,
                                    GError      **error);
