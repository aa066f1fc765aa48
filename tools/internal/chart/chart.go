// Package chart writes gonum/plot panels to one PNG or SVG file, in a grid:
// the layout every chart Sluice's simulators and benchmarks draw shares.
package chart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// CheckPath reports whether path names a .png or .svg file in a directory
// that exists, for commands to check before their runs.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
	default:
		return fmt.Errorf("chart %q: the file name must end in .png or .svg", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s is not a directory: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// WriteGrid draws plots in rows of cols panels, each panelHeight high and
// the whole 13 inches wide, to path (.png or .svg).
func WriteGrid(path string, plots []*plot.Plot, cols int, panelHeight vg.Length) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	nrows := (len(plots) + cols - 1) / cols
	// Rows of cols panels, the last padded with nils (no panel).
	padded := append(slices.Clone(plots), make([]*plot.Plot, nrows*cols-len(plots))...)
	grid := slices.Collect(slices.Chunk(padded, cols))
	w, h := 13*vg.Inch, vg.Length(nrows)*panelHeight
	var (
		canvas vg.CanvasWriterTo
		dc     draw.Canvas
	)
	if strings.ToLower(filepath.Ext(path)) == ".svg" {
		c := vgsvg.New(w, h)
		canvas, dc = c, draw.New(c)
	} else {
		c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
		canvas, dc = vgimg.PngCanvas{Canvas: c}, draw.New(c)
	}
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: 6 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter, PadLeft: 3 * vg.Millimeter, PadRight: 3 * vg.Millimeter}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	_, err = canvas.WriteTo(f)
	return errors.Join(err, f.Close())
}
