#!/usr/bin/env python3
"""The mutation check: each entry below puts one bug back (a one-line
change of the source) in a scratch copy of the tree and runs the tests
that exist to catch it; every one of them must fail. Each is also run on
the unchanged copy first, where it must pass: a test that fails either
way catches nothing.

    .ci/mutations.py                  every mutation (~15 min on 2 cores)
    .ci/mutations.py -k notify        those whose name matches a regexp
    .ci/mutations.py --list           the table, without running anything
    .ci/mutations.py --snippets       only check that every snippet is still
                                      found once (seconds; .ci/run does it)
    .ci/mutations.py --markdown       also print the result as a table

A mutation names its target by a snippet that must occur exactly once in
its file, not by a line number, so it follows the code when a refactor
moves it; when the snippet is gone the check fails and says which entry
to update. The scratch copy holds the working tree's files (tracked and
untracked, not ignored), so uncommitted work is checked as it is.
RELIABILITY.md ("Mutation check") has the last result.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass
class Mutation:
    name: str  # what the bug is
    file: str  # relative to the repository root
    find: str  # a snippet that occurs exactly once in file
    replace: str  # what it becomes: the bug
    tests: list  # (package, test name): each must fail with the bug


MUTATIONS = [
    Mutation(
        "a NOTIFY answered with an error is taken for no answer and retransmitted (RFC 1996 §4.7)",
        "serve/notify.go",
        "if k.to != from || st.id != id || st.inFlight == 0 {",
        "if k.to != from || st.id != id || st.inFlight == 0 || rcode != dns.RcodeSuccess {",
        [("./serve", "TestNotifyErrorAnswerNotRetried"), (".", "TestInteropNotifyAnsweredNotRetried")],
    ),
    Mutation(
        "UDP IXFR: no transfer ACL",
        "serve/xfr.go",
        "if q.signed || acc.requiredKey(q.src.Addr()) != nil || !acc.mayTransfer(z.name, q.src.Addr()) {",
        "if q.signed || acc.requiredKey(q.src.Addr()) != nil {",
        [("./serve", "TestUDPIXFRAccess"), (".", "TestInteropSecondaries")],
    ),
    Mutation(
        "UDP IXFR: no key binding (peer_keys)",
        "serve/xfr.go",
        "if q.signed || acc.requiredKey(q.src.Addr()) != nil || !acc.mayTransfer(z.name, q.src.Addr()) {",
        "if q.signed || !acc.mayTransfer(z.name, q.src.Addr()) {",
        [("./serve", "TestUDPIXFRAccess"), (".", "TestInteropSecondaries")],
    ),
    Mutation(
        "UDP IXFR: neither ACL nor key binding",
        "serve/xfr.go",
        "if q.signed || acc.requiredKey(q.src.Addr()) != nil || !acc.mayTransfer(z.name, q.src.Addr()) {",
        "if q.signed || acc == nil {",
        [("./serve", "TestUDPIXFRAccess"), (".", "TestInteropSecondaries")],
    ),
    Mutation(
        "TCP transfer: a key-bound peer may sign with any configured key",
        "serve/xfr.go",
        "if need := acc.requiredKey(src.Addr()); need != nil && need != key {",
        "if need := acc.requiredKey(src.Addr()); need != nil && key == nil {",
        [("./serve", "TestTransferKeyBinding")],
    ),
    Mutation(
        "serials compared as plain integers, not RFC 1982",
        "db/serial.go",
        "return a != b && int32(b-a) > 0",
        "return a < b",
        [("./db", "TestSerialLess"), ("./db", "TestNextSerial"), ("./db", "TestRaiseSerial")],
    ),
    Mutation(
        "no full listing after a changefeed reconnect",
        "feeds/sdc/queue.go",
        "\t\t\tf.requestRelist()\n",
        "",
        [("./feeds/sdc", "TestFeedRelistsAfterReconnect")],
    ),
    Mutation(
        "a listing during a backlog ends it instead of pausing it",
        "feeds/scheduler.go",
        "\t\treturn nil, stepPaused, false\n",
        "\t\treturn nil, stepDone, false\n",
        [("./feeds", "TestSchedulerTransitions"), ("./feeds", "TestListingDuringABacklog")],
    ),
    Mutation(
        "an urgent VM skipped (in flight, marked again) ends the batch after its first VM",
        "feeds/scheduler.go",
        "\t\t\t\tuuid, s.urgent, outOfTurn = s.urgent[0], s.urgent[1:], true\n",
        "\t\t\t\tuuid, s.urgent, outOfTurn = s.urgent[0], s.urgent[1:], true\n\t\t\t\turgent = true\n",
        [("./feeds", "TestSchedulerTransitions")],
    ),
    Mutation(
        "a chunk is parked for a change it holds itself",
        "feeds/scheduler.go",
        "!s.state.phase.afterOutOfTurn() && s.urgentBesides(open, p.inFlight) {",
        "!s.state.phase.afterOutOfTurn() && len(s.urgent) > 0 {",
        [("./feeds", "TestSchedulerTransitions")],
    ),
    Mutation(
        "an out-of-turn batch is followed by another",
        "feeds/scheduler.go",
        "afterOutOfTurn := s.state.phase.afterOutOfTurn()\n",
        "afterOutOfTurn := false\n",
        [("./feeds", "TestSchedulerTransitions")],
    ),
    Mutation(
        "a listing undoes a change that came after it began",
        "feeds/listing.go",
        "ok && c.keeps(f.modified) {",
        "ok && false && c.keeps(f.modified) {",
        [("./feeds", "TestChangesOvertakeAListing")],
    ),
    Mutation(
        "a VM a change created during a listing loses its owner with the listing",
        "feeds/listing.go",
        "u.setUsers(u.ownersKept(inv.Users, l.start), cause)",
        "u.setUsers(inv.Users, cause)",
        [("./feeds", "TestChangesOvertakeAListing")],
    ),
    Mutation(
        "the backlog signal stays open after the drain that ends a backlog",
        "feeds/committer.go",
        "\tc.db.Backlog().Close()\n\tif c.compactDue {",
        "\tif c.compactDue {",
        [("./feeds", "TestBacklogEnds")],
    ),
    Mutation(
        "a backlog ends before its last, partial chunk lands: serve builds its tables beside that commit",
        "feeds/committer.go",
        "\t\tc.db.Backlog().Ending()\n\t\tdefer c.db.Backlog().Close()\n",
        "\t\tc.db.Backlog().Close()\n",
        [("./feeds", "TestBacklogEnds")],
    ),
    Mutation(
        "a heap limit does not bound a backlog's chunks (a 1M-VM first load in a 2 GiB cgroup is killed)",
        "feeds/scheduler.go",
        "\t\tn = min(n, s.maxChunk)\n",
        "\t\t_ = s.maxChunk\n",
        [("./feeds", "TestChunkSize")],
    ),
    Mutation(
        "a member down by its status alone is not held by its services",
        "feeds/selfremoval.go",
        "\tcase d.Holdable && len(names) > 0:",
        "\tcase false:",
        [("./feeds", "TestUpdaterSelfRemovalPace"), ("./feeds", "TestUpdaterHeldReason")],
    ),
    Mutation(
        "no global TCP connection limit",
        "serve/tcp.go",
        "if s.tcpActive.Load() >= int64(s.cfg.MaxTCPConns) {",
        "if false {",
        [("./serve", "TestTCPGlobalLimit")],
    ),
    Mutation(
        "journal entries never trimmed by age",
        "db/journal.go",
        "\t\tif !over && lim.MaxAge > 0 {",
        "\t\tif false {",
        [("./db", "TestChurnDBSize")],
    ),
    Mutation(
        "an IXFR is answered with the whole zone",
        "serve/xfr.go",
        "if ok && len(entries) > 0 && s.ixfrWorthIt(entries, z) {",
        "if ok && len(entries) > 0 && !s.ixfrWorthIt(entries, z) {",
        [(".", "TestInteropOneVMChangeIsIXFR")],
    ),
    Mutation(
        "the soak's leak check never fails",
        "sim_soak_test.go",
        "if after > before+margin {",
        "if false {",
        [(".", "TestHeapFloorGrowth")],
    ),
    Mutation(
        "a loopback client that transfers is taken for a secondary (probed, NOTIFYed)",
        "serve/peers.go",
        "local: netip.Addr.IsLoopback,",
        "local: func(netip.Addr) bool { return false },",
        [(".", "TestLoopbackTransferIsNoPeer")],
    ),
    Mutation(
        "a client that never answered its SOA probe is NOTIFYed",
        "serve/peerstate.go",
        "\tcase configured || p.State == PeerAnswering:\n",
        "\tcase configured || p.State != PeerSilent:\n",
        [("./serve", "TestPeerNotifyPlan")],
    ),
    Mutation(
        "a silent peer is waited for in propagation",
        "serve/notify.go",
        "return s.peerTargets(acc, zone, false)",
        "return s.peerTargets(acc, zone, true)",
        [("./serve", "TestSilentPeerBacksOff")],
    ),
    Mutation(
        "a silent peer's NOTIFY backoff is not capped at an hour",
        "serve/peerstate.go",
        "silentBackoffMax = time.Hour",
        "silentBackoffMax = 4 * time.Hour",
        [("./serve", "TestPeerNotifyPlan"), ("./serve", "TestSilentPeerBacksOff")],
    ),
    Mutation(
        "an unanswered version probe is kept as the version for an hour",
        "serve/peerversion.go",
        "\tif answered {\n",
        "\tif answered || !answered {\n",
        [("./serve", "TestPeerVersionRetried")],
    ),
    Mutation(
        "version._cns_meta is REFUSED",
        "serve/answer.go",
        "case s.metaVersion != \"\" && !q.clientOnly() && underMeta(q.lower()):",
        "case false:",
        [("./serve", "TestCNSMetaVersion")],
    ),
    Mutation(
        "closing a UDP socket leaves its epoll set open and its parked reader asleep",
        "serve/udp_linux.go",
        "\ts.ep.Close()\n\treturn s.f.Close()",
        "\treturn s.f.Close()",
        [("./serve", "TestUDPSocketCloseClosesItsEpollSet"), ("./serve", "TestUDPCloseWakesParkedReader")],
    ),
    Mutation(
        "a UDP reader woken once never arms its socket again",
        "serve/udp_linux.go",
        "\t\t\tb.armed = false\n",
        "",
        [("./serve", "TestPacketBatchWakesForEachDatagram")],
    ),
    Mutation(
        "an answer the kernel refuses loses the rest of its batch",
        "serve/udp_linux.go",
        "\t\t\tb.sent++ // one bad destination must not lose the rest\n\t\t\tcontinue",
        "\t\t\tbreak",
        [("./serve", "TestPacketBatchBadDestinationLosesOnlyItsAnswer")],
    ),
    Mutation(
        "a reload leaves a start-only setting for the next restart",
        "serve_cmd.go",
        "\ts.restart = func(settings []string) {",
        "\t_ = func(settings []string) {",
        [(".", "TestReloadRestartsForStartOnlySettings")],
    ),
    Mutation(
        "a zone that leaves the configuration stays served (its removal lacks the wire name serve drops it by)",
        "db/commit.go",
        "c.zones[name] = &zoneWork{name: name, wire: wire, remove: true,",
        "c.zones[name] = &zoneWork{name: name, wire: wire[:0], remove: true,",
        [("./db", "TestZoneConfigChanges"), (".", "TestReloadAppliesEveryKey")],
    ),
    Mutation(
        "a reload does not hand the DNS server its transfer policy",
        "reload.go",
        "\t\tif sub.changed(old, next) {\n",
        "\t\tif sub.changed(old, next) && sub.name != \"transfers\" {\n",
        [(".", "TestReloadAppliesEveryKey")],
    ),
    Mutation(
        "a reload does not hand the updater its names and zones",
        "reload.go",
        "\t\tif sub.changed(old, next) {\n",
        "\t\tif sub.changed(old, next) && sub.name != \"names\" {\n",
        [(".", "TestReloadAppliesEveryKey")],
    ),
    Mutation(
        "the rate limit's subscriber reads a section that never changes",
        "reload.go",
        "func(c *config.Config) policy.RRL { return c.RRL }",
        "func(c *config.Config) policy.RRL { return policy.RRL{} }",
        [(".", "TestReloadableKeysReachASubscriber"), (".", "TestReloadAppliesEveryKey")],
    ),
    Mutation(
        "a new db file's directory is not synced: a power cut after the first load takes the file back",
        "db/db.go",
        "\tif created {",
        "\tif created && false {",
        [("./db", "TestPowerCut")],
    ),
    Mutation(
        "the live compaction renames its copy without syncing the directory: commits after it are lost in a power cut",
        "db/compact.go",
        "if err := durable.Rename(tmp, d.path); err != nil {",
        "if err := os.Rename(tmp, d.path); err != nil {",
        [("./db", "TestPowerCut")],
    ),
    Mutation(
        "durable.MkdirAll does not sync the directory it made a directory in",
        "db/durable/durable.go",
        "\treturn SyncDir(parent)",
        "\treturn nil",
        [("./db/durable", "TestMkdirAllSurvivesCut"), (".", "TestPowerCutDBDirectory")],
    ),
    Mutation(
        "cns db backup closes its file unsynced",
        "db_cmd.go",
        "err = durable.Close(f) // a backup that a power cut can empty is none",
        "err = f.Close()\n\t\t_ = durable.Close",
        [(".", "TestPowerCutBackups")],
    ),
    Mutation(
        "cnsadm config saves through a rename that is not synced",
        "admin/cnsadm/edit.go",
        "return durable.WriteFile(f.Path, append(data, '\\n'), 0o644)",
        "_ = durable.WriteFile\n\treturn os.WriteFile(f.Path, append(data, '\\n'), 0o644)",
        [("./admin/cnsadm", "TestFileStoreSaveSurvivesPowerCut")],
    ),
    Mutation(
        "the serial check does not have the journal forget a serial a secondary holds in a version cns cannot vouch for",
        "serve/serialcheck.go",
        "\tc.forgetReused(got)\n\tfor _, r := range raises {",
        "\tfor _, r := range raises {",
        [("./serve", "TestSerialCheckReusedSerial")],
    ),
    Mutation(
        "an IXFR from a peer the check has not heard starts from the journal",
        "serve/serialcheck.go",
        "if zc == nil || !zc.untrusted {",
        "if true {",
        [("./serve", "TestSerialCheckReusedSerial")],
    ),
    Mutation(
        "the raise's journal entry starts an IXFR from the serial a secondary shares with an unverified db",
        "serve/serialcheck.go",
        "if len(raises) > 0 {",
        "if false {",
        [("./serve", "TestSerialCheckSameSerialGetsWholeZone")],
    ),
    Mutation(
        "a db created empty is verified before it holds a zone",
        "serve/serialcheck.go",
        "complete && len(names) > 0",
        "complete",
        [("./serve", "TestSerialCheckEmptyDBStaysUnverified")],
    ),
    Mutation(
        "the removal guard holds nothing: a held VM's removal is stored",
        "feeds/removals.go",
        "if len(v.Hold) > 0 {",
        "if false && len(v.Hold) > 0 {",
        [("./feeds", "TestGuardCNAPIAllDownThenBack"), ("./feeds", "TestGuardShortListingConfirmed"),
         ("./feeds", "TestGuardShortListingRecovers"), ("./feeds", "TestGuardOwnersOffAccepted"),
         ("./feeds/file", "TestGuardInventoryTruncated"),
         ("./feeds/file", "TestGuardInventoryShrinkConfirmed")],
    ),
    Mutation(
        "the removal guard holds one compute node's (or one owner's) VMs",
        "feeds/guard/guard.go",
        "oneGroup := len(groups) == 1 && c != Unlisted",
        "oneGroup := false",
        [("./feeds/guard", "TestGuard")],
    ),
    Mutation(
        "the removal guard adds up the VMs several listings missed (destroys the changefeed missed) as one short listing",
        "feeds/guard/guard.go",
        "\tif c == Unlisted {",
        "\tif false && c == Unlisted {",
        [("./feeds/guard", "TestGuard"), ("./feeds", "TestUnlistedJudgedByListing")],
    ),
    Mutation(
        "the removal guard counts every departure from services (destroys, stops) as cn_down",
        "feeds/removals.go",
        "case !d.ListServices && slices.Contains(d.Reasons, records.ReasonCNDown):",
        "case !d.ListServices:",
        [("./feeds", "TestGuardTenantDestroys500")],
    ),
    Mutation(
        "a hold applies after its period without fresh data from the upstream",
        "feeds/guard/guard.go",
        "if f := fresh[c]; !f.Before(end) && !f.After(now) {",
        "if true {",
        [("./feeds/guard", "TestGuard"), ("./feeds", "TestGuardShortListingConfirmed")],
    ),
    Mutation(
        "the removal guard's state is not stored: a restart forgets the hold",
        "feeds/removals.go",
        "b.cs.Guard, b.guardGen = g.state.Encode(), g.gen",
        "b.guardGen = g.gen",
        [("./feeds", "TestGuardRestartDuringHold")],
    ),
    Mutation(
        "a held VM computed to anything else stays held: the upstream's recovery releases nothing",
        "feeds/removals.go",
        "case o != changed || c == nil || c.removal.Cause != cause:\n\t\tb.kept = append(b.kept, uuid)",
        "case o != changed || c == nil || c.removal.Cause != cause:\n\t\t_ = uuid",
        [("./feeds", "TestGuardCNAPIAllDownThenBack"), ("./feeds/file", "TestGuardInventoryTruncated")],
    ),
    Mutation(
        "a held VM keeps the instance name or PTR a new VM needs",
        "feeds/heldnames.go",
        "\tif len(vms) == 0 {\n\t\treturn\n\t}\n\tcauses := map[string]guard.Cause{}",
        "\tif true {\n\t\treturn\n\t}\n\tcauses := map[string]guard.Cause{}",
        [("./feeds", "TestGuardHeldPTRGoesToNewVM"), ("./feeds", "TestGuardHeldPTRGoesToNewVMOfTheSameListing"),
         ("./feeds", "TestGuardHeldAliasGoesToNewVM")],
    ),
    Mutation(
        "a VM held for cn_down is let go for a new VM's name (it keeps its instance names anyway: only its services go)",
        "feeds/guard/guard.go",
        "if c.KeepsInstanceNames() || len(s.Held) == 0 {",
        "if len(s.Held) == 0 {",
        [("./feeds/guard", "TestGuard")],
    ),
    Mutation(
        "an alias a VM already shares with a held VM is taken for a new need: the held VM is let go",
        "feeds/heldnames.go",
        "if !ptr[i] && slices.Contains(vms, by[i]) {",
        "if false && !ptr[i] && slices.Contains(vms, by[i]) {",
        [("./feeds", "TestGuardHeldAliasSharedStaysHeld")],
    ),
    Mutation(
        "a VM whose records are prepared compact names none of them: a held VM keeps the name a new VM needs",
        "db/prepare.go",
        "\tp := vc.prepared\n\tif p == nil {",
        "\tp := vc.prepared\n\tif p == nil || true {",
        [("./db", "TestVMsAt"), ("./feeds", "TestGuardHeldPTRGoesToNewVM")],
    ),
    Mutation(
        "a slow collapse is held from the batch that trips the guard only: what the window applied before stays gone",
        "feeds/guard/guard.go",
        "recalled := p.recall(s, b, counts, v)",
        "recalled, _ := 0, counts",
        [("./feeds/guard", "TestGuard"), ("./feeds", "TestGuardSlowCNCollapseHeldWhole"),
         ("./feeds", "TestGuardChunkedShortListingHeldWhole"), ("./feeds", "TestGuardSlowOwnersOffHeldWhole")],
    ),
    Mutation(
        "a held VM is computed as its upstream says: a recalled VM does not get its names back",
        "feeds/changes.go",
        "if cause, held := u.guard.state.Keeps(uuid); held && cand != nil && cand.removal.Cause == cause {",
        "if cause, held := u.guard.state.Keeps(uuid); false && held && cand != nil && cand.removal.Cause == cause {",
        [("./feeds", "TestGuardSlowCNCollapseHeldWhole"), ("./feeds", "TestGuardSlowOwnersOffHeldWhole")],
    ),
    Mutation(
        "what the model held of a VM a listing left out goes with its deletion: a listing's first chunks cannot be recalled",
        "feeds/removals.go",
        "\t\t\tif gone.vm == nil {\n\t\t\t\tdelete(u.guard.unlisted, vc.UUID)",
        "\t\t\tif true {\n\t\t\t\tdelete(u.guard.unlisted, vc.UUID)",
        [("./feeds", "TestGuardChunkedShortListingHeldWhole"), ("./feeds", "TestGuardRecalledVMYieldsToNewVM")],
    ),
    Mutation(
        "a recalled VM takes back the PTR a new VM took meanwhile",
        "feeds/heldnames.go",
        "case isHeld(c.vm) && !hold[c.vm] && !isHeld(c.other):",
        "case false:",
        [("./feeds", "TestGuardRecalledVMYieldsToNewVM")],
    ),
    Mutation(
        "a held VM with nothing stored stays held: a hold whose recalled VM was destroyed never ends",
        "feeds/removals.go",
        "b.kept = append(b.kept, uuid) // nothing stored to keep: gone meanwhile",
        "_ = uuid",
        [("./feeds", "TestGuardRecalledVMDestroyedLeavesTheHold")],
    ),
    Mutation(
        "the window's VMs are kept until the next removal, however long: Advance does not forget them",
        "feeds/guard/guard.go",
        "\t\tp.expire(s, now) // (not worth a commit",
        "\t\t_ = now // (not worth a commit",
        [("./feeds/guard", "TestWindowExpires")],
    ),
]


def tree_files(root):
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, check=True, capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(root, f))]


def scratch_copy(root):
    dst = tempfile.mkdtemp(prefix="cns-mutations-")
    for f in tree_files(root):
        os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(root, f), os.path.join(dst, f))
    return dst


def run_tests(tree, tests):
    """Runs each (package, test) and returns {test: (passed, output)}."""
    results = {}
    for pkg, name in tests:
        cmd = ["go", "test", "-count=1", "-timeout", "15m", "-run", f"^{name}$", pkg]
        p = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
        out = p.stdout + p.stderr
        ran = re.search(rf"^(---|ok|FAIL)\b", out, re.M) is not None
        failed_test = re.search(rf"^\s*--- FAIL: {re.escape(name)}\b", out, re.M) is not None
        if p.returncode == 0 and f"no tests to run" in out:
            results[(pkg, name)] = ("missing", out)
        elif p.returncode == 0:
            results[(pkg, name)] = ("pass", out)
        elif failed_test:
            results[(pkg, name)] = ("FAIL", out)
        else:
            # A build failure or a crash outside the test: not a catch.
            results[(pkg, name)] = ("error" if ran else "build", out)
    return results


def apply(tree, m):
    path = os.path.join(tree, m.file)
    with open(path) as f:
        src = f.read()
    n = src.count(m.find)
    if n != 1:
        return None, f"{m.file}: the snippet occurs {n} times (want 1): update this entry to where the code went: {m.find!r}"
    with open(path, "w") as f:
        f.write(src.replace(m.find, m.replace))
    return src, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", default=".", help="run the mutations whose name matches this regexp")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--markdown", action="store_true", help="print the result as a Markdown table too")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy")
    ap.add_argument("--snippets", action="store_true", help="only check that each snippet occurs once in its file")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if re.search(args.k, m.name, re.I)]
    if args.snippets:
        root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
        stale = 0
        for m in chosen:
            with open(os.path.join(root, m.file)) as f:
                n = f.read().count(m.find)
            if n != 1:
                stale += 1
                print(f"{m.name}: {m.file}: the snippet occurs {n} times (want 1): update the entry to where the code went: {m.find!r}")
        print(f"{len(chosen) - stale} of {len(chosen)} mutation targets found")
        return 1 if stale else 0
    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.file}: {m.find!r}\n    -> {m.replace!r}\n  caught by: {', '.join(t for _, t in m.tests)}")
        return 0
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    tree = scratch_copy(root)
    print(f"scratch copy: {tree}", flush=True)
    rows, bad = [], 0
    try:
        for m in chosen:
            start = time.time()
            before = run_tests(tree, m.tests)
            src, err = apply(tree, m)
            if err:
                print(f"STALE  {m.name}: {err}", flush=True)
                rows.append((m, {t: ("stale", "") for t in m.tests}, before))
                bad += 1
                continue
            try:
                after = run_tests(tree, m.tests)
            finally:
                with open(os.path.join(tree, m.file), "w") as f:
                    f.write(src)
            caught = all(after[t][0] == "FAIL" for t in m.tests)
            clean = all(before[t][0] == "pass" for t in m.tests)
            verdict = "caught" if caught and clean else "NOT CAUGHT" if clean else "TEST FAILS WITHOUT THE BUG"
            if verdict != "caught":
                bad += 1
            print(f"{verdict:6}  {m.name} ({time.time() - start:.0f} s)", flush=True)
            for t in m.tests:
                print(f"        {t[1]} ({t[0]}): without the bug {before[t][0]}, with it {after[t][0]}", flush=True)
                for state, out in (before[t], after[t]):
                    if state in ("build", "error", "missing"):
                        print("          " + "\n          ".join(out.strip().splitlines()[-15:]))
            rows.append((m, after, before))
    finally:
        if not args.keep:
            shutil.rmtree(tree, ignore_errors=True)
    if args.markdown:
        print("\n| mutation | file: change | test | without the bug | with it |\n|---|---|---|---|---|")
        def code(s):
            return "`" + s.strip().replace("|", "\\|") + "`" if s.strip() else "(deleted)"
        for m, after, before in rows:
            for i, t in enumerate(m.tests):
                head = f"{m.name} | `{m.file}`: {code(m.find)} → {code(m.replace)}" if i == 0 else " | "
                print(f"| {head} | `{t[1]}` ({t[0]}) | {before[t][0]} | {after[t][0]} |")
    print(f"\n{len(rows) - bad} of {len(rows)} mutations caught by every test named for them")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
