// Consistency checks of the gate window layout (kvm-module/gate/wh_gate.h).
#include <gtest/gtest.h>

#include "wh_gate.h"

TEST(GateLayout, PagesDoNotOverlapAndFitTheWindow) {
  static_assert(WH_GATE_DESC_OFF + 0x1000 <= WH_GATE_CODE_OFF);
  static_assert(WH_GATE_CODE_OFF + 0x1000 <= WH_GATE_PT_OFF);
  static_assert(WH_GATE_PT_OFF + WH_GATE_PT_PAGES * 0x1000 <= WH_GATE_MBOX_OFF);
  static_assert(WH_GATE_MBOX_OFF + WH_GATE_NSLOTS * 0x1000 <= WH_GATE_DEFAULT_PART);
  static_assert(WH_GATE_DEFAULT_PART <= WH_GATE_STATE_OFF);
  static_assert(WH_GATE_STATE_OFF + 0x1000 <= WH_GATE_CHAN_OFF);
  static_assert(WH_GATE_CHAN_OFF + WH_GATE_NSLOTS * 0x1000 == WH_GATE_WINDOW);
  // A window must fit in two page tables (PT area: PML4, PDPT, PD, 2 PT, spare).
  static_assert(WH_GATE_WINDOW <= 2 * 0x200000 - 0x1000);
  static_assert(WH_SLOT_RESP >= 8 + WH_SLOT_MAX);
  static_assert(WH_CHAN_ACK_SEQ >= 8 + WH_SLOT_MAX && WH_CHAN_ACK_SEQ + 4 <= WH_SLOT_RESP);
  static_assert(WH_SLOT_RESP + 8 + WH_SLOT_MAX <= 0x1000);
  SUCCEED();
}
