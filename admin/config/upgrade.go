package config

// Upgrade renames the legacy keys of every zone's settings (ZoneKeys'
// Legacy: slaves → peers, CNS-46; hidden_master → hidden_primary, CNS-48)
// in cfg, in place, and returns the changed top-level keys for
// Editor.Commit; none when there is nothing to do. A legacy value is kept
// where Parse would have used it (its new name unset), so the upgraded
// file means what the old one did.
func Upgrade(cfg map[string]any) map[string]any {
	changes := map[string]any{}
	if zones, ok := cfg["forward_zones"].(map[string]any); ok {
		for _, z := range zones {
			if zm, ok := z.(map[string]any); ok && renameLegacy(zm) {
				changes["forward_zones"] = zones
			}
		}
	}
	if rev, ok := cfg["reverse_zones"].(map[string]any); ok && renameLegacy(rev) {
		changes["reverse_zones"] = rev
	}
	return changes
}

// renameLegacy renames one zone's legacy keys and reports whether it
// changed anything.
func renameLegacy(z map[string]any) bool {
	changed := false
	for _, k := range ZoneKeys {
		v, ok := z[k.Legacy]
		if k.Legacy == "" || !ok {
			continue
		}
		if unset(z[k.Name]) {
			z[k.Name] = v
		}
		delete(z, k.Legacy)
		changed = true
	}
	return changed
}

// unset is how Parse sees a zone key that lets its legacy name count:
// absent, null, false or an empty list.
func unset(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case []any:
		return len(x) == 0
	}
	return false
}
