package guest

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// cloudConfig renders a #cloud-config document.
func cloudConfig(doc map[string]any) (string, error) {
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("marshal cloud-config: %w", err)
	}
	return "#cloud-config\n" + string(out), nil
}

// marshalYAML renders v as YAML.
func marshalYAML(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("marshal yaml: %w", err)
	}
	return string(out), nil
}
