/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where the SessionHelper interface (dbus/org.vivarium.Vivarium1.SessionHelper.xml)
 * lives on the peer-to-peer connection between vivariumd and one session's
 * vivarium-session-helper: the one definition both ends use. */
#define VD_HELPER_INTERFACE   "org.vivarium.Vivarium1.SessionHelper"
#define VD_HELPER_OBJECT_PATH "/org/vivarium/Vivarium1/SessionHelper"
