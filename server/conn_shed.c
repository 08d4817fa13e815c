/* When the connection table fills up (see conn_shed.h). */
#include "server/conn_shed.h"

unsigned conn_shed_headroom(unsigned max) {
  unsigned room = max / 8;
  if (room < 1)
    room = 1;
  return room > 64 ? 64 : room;
}

unsigned conn_shed_count(unsigned open, unsigned max) {
  unsigned room = conn_shed_headroom(max);
  unsigned mark = max > room ? max - room : 0;
  return open > mark ? open - mark : 0;
}
