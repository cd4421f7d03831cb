package main

import (
	"fmt"
	"strings"
)

// asksHelp reports a -h or --help among a command's arguments (before a
// "--").
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

// descColumn is where [usage] starts the descriptions of commands.
const descColumn = 11

// commandLine splits the first line of a command's entry in [usage] into
// its synopsis and the start of its description; ok is false for any
// other line.
func commandLine(line string) (synopsis, desc string, ok bool) {
	if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
		return "", "", false
	}
	synopsis = line
	if len(line) > descColumn && line[descColumn-1] == ' ' && line[descColumn] != ' ' {
		synopsis, desc = line[:descColumn], line[descColumn:]
	}
	return strings.TrimSpace(synopsis), desc, true
}

// commandUsage is the usage of one command, from its entry in [usage]: its
// synopsis, then its description ("" for an unknown command).
func commandUsage(cmd string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		if synopsis, desc, ok := commandLine(line); ok {
			name, _, _ := strings.Cut(synopsis, " ")
			if in = name == cmd; in {
				fmt.Fprintf(&b, "usage: ctxflow %s\n\n", synopsis)
				line = desc
			}
		} else if !strings.HasPrefix(line, "   ") {
			in = false
		}
		if in && strings.TrimSpace(line) != "" {
			fmt.Fprintf(&b, "  %s\n", strings.TrimSpace(line))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\nConfiguration is read from environment variables (see README.md).\n"
}
