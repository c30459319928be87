package config

import "reflect"

// Diff names the keys whose values differ between two configurations,
// and, of those, the ones that take effect only at the next restart (a
// reload applies the others).
func Diff(old, next *Config) (changed, restart []string) {
	for _, k := range Keys {
		if k.value == nil || reflect.DeepEqual(k.value(old), k.value(next)) {
			continue
		}
		changed = append(changed, k.Name)
		if k.Restart {
			restart = append(restart, k.Name)
		}
	}
	return changed, restart
}
