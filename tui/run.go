package tui

import (
	"context"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Run shows the UI on the terminal until the operator quits or ctx ends.
// NO_COLOR (any value) turns colour off; the markers carry the meaning.
func Run(ctx context.Context, src Source, opts Options) error {
	if os.Getenv("NO_COLOR") != "" {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	p := tea.NewProgram(New(src, opts), tea.WithAltScreen(), tea.WithContext(ctx))
	_, err := p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}
