// Package demo holds the demo knowledge base that `ctxflow dev` ingests
// once into a new data directory (CTXFLOW_DEMO_DOCS): a few short product
// pages in Chinese, for the conversation about the 华为Mate60, and pages
// about ctxflow itself in English and Chinese.
//
// The pages were written for this project; they hold no third-party text.
// Their figures are launch figures, for the demo: not a buying guide.
package demo

import "embed"

// Pages are the demo documents, Markdown files at the root of the package.
//
//go:embed *.md
var Pages embed.FS
