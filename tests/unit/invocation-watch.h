/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

/* Counts the method invocations a skeleton receives that are still alive:
 * a handler that answers a call must also let go of it, or every call
 * leaks its invocation and the message it carries (the daemon's RSS grew
 * by one of each per task).
 *
 * It watches through emission hooks on the interface's handle-* signals,
 * not g-authorize-method: a g-authorize-method handler makes GDBus
 * authorize, and so dispatch, each call from a thread of its own, and the
 * calls of one sender no longer reach their handlers in order. */
typedef struct {
  gpointer  skeleton;
  guint     received;
  guint     alive;
  GArray   *hooks;      /* (signal id, hook id) pairs */
} InvocationWatch;

void invocation_watch_attach        (InvocationWatch        *watch,
                                     GDBusInterfaceSkeleton *skeleton,
                                     GType                   interface_type);
void invocation_watch_assert_freed  (InvocationWatch        *watch);
void invocation_watch_detach        (InvocationWatch        *watch);
