package config

// Upgrade renames the legacy keys of every zone's settings (ZoneKeys'
// Legacy: slaves → peers, CNS-46; hidden_master → hidden_primary, CNS-48)
// in cfg, in place, and returns the changed top-level keys for
// Editor.Commit; none when there is nothing to do. A legacy value is kept
// where Parse would have used it (its new name unset), so the upgraded
// file means what the old one did.
func Upgrade(cfg *JSONObject) map[string]any {
	changes := map[string]any{}
	if zones := cfg.Object("forward_zones"); zones != nil {
		for _, name := range zones.Keys() {
			if z := zones.Object(name); z != nil && renameLegacy(z) {
				changes["forward_zones"] = zones
			}
		}
	}
	if rev := cfg.Object("reverse_zones"); rev != nil && renameLegacy(rev) {
		changes["reverse_zones"] = rev
	}
	return changes
}

// renameLegacy renames one zone's legacy keys and reports whether it
// changed anything.
func renameLegacy(z *JSONObject) bool {
	changed := false
	for _, k := range ZoneKeys {
		v, ok := z.Get(k.Legacy)
		if k.Legacy == "" || !ok {
			continue
		}
		if unset(z.Value(k.Name)) {
			z.Set(k.Name, v)
		}
		z.Delete(k.Legacy)
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
