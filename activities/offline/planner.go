package offline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// Planner is the offline engine's agent planner: without a model it still
// runs a task, honestly. It explores the schema a step at a time — list
// the tables, describe those the goal names — and compiles the simple
// question shapes it knows to SQL: a row count of every table, a count of
// one table (optionally of the rows with a value the goal names), the
// top N of a table by a numeric column, and a sum or average of a numeric
// column, optionally by a column of a table it references. Anything else
// it answers by saying that writing the SQL needs a model, listing what it
// found. Its decisions are a pure function of the request.
type Planner struct{}

var _ activities.Planner = Planner{}

// Next implements [activities.Planner].
func (Planner) Next(ctx context.Context, req activities.PlanRequest) (activities.PlanStep, error) {
	if err := ctx.Err(); err != nil {
		return activities.PlanStep{}, err
	}
	p := plan{req: req, goal: strings.ToLower(req.Goal), zh: lexical.IsChinese(req.Goal)}
	step := p.next()
	step.Engine = ModelName
	if step.Answer != "" {
		step.Answer = p.label() + " " + step.Answer
	}
	return step, nil
}

type plan struct {
	req  activities.PlanRequest
	goal string
	zh   bool
}

func (p plan) label() string {
	if p.zh {
		return lexical.LabelZH
	}
	return lexical.LabelEN
}

func call(thought, tool string, args any) activities.PlanStep {
	b, _ := json.Marshal(args)
	return activities.PlanStep{Thought: thought, Calls: []convo.ToolCall{{Name: tool, Args: b}}}
}

var eachTable = regexp.MustCompile(`(?i)\beach table\b|\bevery table\b|\ball (the )?tables\b|每张表|每个表|所有表|各表`)

func (p plan) next() activities.PlanStep {
	f := p.req.Facts
	if len(f.Tables) == 0 {
		return call("First, which tables are there?", "list_tables", struct{}{})
	}
	if eachTable.MatchString(p.req.Goal) && p.wantsCount() {
		return p.countEach()
	}
	tables := p.tablesNamed()
	if len(tables) == 0 {
		return p.cannot("the goal names none of the tables")
	}
	for _, t := range tables {
		if f.Schema(t) == "" {
			return call("Describe "+t+", which the goal is about.", "describe_table", map[string]string{"table": t})
		}
	}
	if res, ok := p.lastResult(); ok {
		return activities.PlanStep{Answer: p.answerFrom(res)}
	}
	sql, why := p.compile(tables)
	if sql == "" {
		return p.cannot(why)
	}
	return call(why, "run_sql", map[string]string{"sql": sql})
}

func (p plan) wantsCount() bool {
	return strings.Contains(p.goal, "how many") || strings.Contains(p.goal, "count") || strings.Contains(p.goal, "number of") ||
		strings.Contains(p.req.Goal, "多少") || strings.Contains(p.req.Goal, "几")
}

// countBySQL is the most tables countEach counts with one SELECT count(*)
// each: the SQL history, which remembers the counts, keeps the last 20
// queries. Past it, describe_table counts (its schema fact keeps the row
// count, for up to 64 tables).
const countBySQL = 16

// countEach counts the rows of one table a step, then answers with all.
func (p plan) countEach() activities.PlanStep {
	counts := p.counts()
	for _, t := range p.req.Facts.Tables {
		if _, ok := counts[t]; ok {
			continue
		}
		if len(p.req.Facts.Tables) > countBySQL {
			return call("Describe "+t+", which counts its rows.", "describe_table", map[string]string{"table": t})
		}
		return call("Count the rows of "+t+".", "run_sql", map[string]string{"sql": fmt.Sprintf(`SELECT count(*) AS rows_in_%s FROM "%s"`, t, t)})
	}
	var b strings.Builder
	total := 0
	for i, t := range p.req.Facts.Tables {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", t, counts[t])
		total += counts[t]
	}
	if p.zh {
		return activities.PlanStep{Answer: fmt.Sprintf("共 %d 张表，%d 行：%s。（每张表一条 SELECT count(*)）", len(p.req.Facts.Tables), total, b.String())}
	}
	return activities.PlanStep{Answer: fmt.Sprintf("%d tables, %d rows in all: %s. (One SELECT count(*) a table.)", len(p.req.Facts.Tables), total, b.String())}
}

// countResult reads the counts run so far from the SQL history (which
// keeps them when older steps are folded out of the view).
var countResult = regexp.MustCompile(`AS rows_in_([A-Za-z0-9_]+) FROM "[A-Za-z0-9_]+" → = (\d+)`)

// schemaRows is the row count a schema fact ends with.
var schemaRows = regexp.MustCompile(`\((\d+) rows\)$`)

func (p plan) counts() map[string]int {
	out := map[string]int{}
	if len(p.req.Facts.Tables) > countBySQL {
		for _, s := range p.req.Facts.Schemas {
			if g := schemaRows.FindStringSubmatch(s.Text); g != nil {
				out[s.Table], _ = strconv.Atoi(g[1])
			}
		}
	}
	for _, q := range p.req.Facts.SQLHistory {
		if g := countResult.FindStringSubmatch(q); g != nil {
			out[g[1]], _ = strconv.Atoi(g[2])
		}
	}
	return out
}

// tablesNamed are the known tables the goal names (a plural, a singular
// or a Chinese name), in the order the goal names them.
func (p plan) tablesNamed() []string {
	type hit struct {
		table string
		pos   int
	}
	var hits []hit
	for _, t := range p.req.Facts.Tables {
		for _, form := range nameForms(t) {
			if i := strings.Index(p.goal, form); i >= 0 {
				hits = append(hits, hit{t, i})
				break
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.pos - b.pos })
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.table
	}
	return out
}

var zhNames = map[string][]string{
	"customers": {"客户", "顾客"}, "orders": {"订单"}, "products": {"商品", "产品"}, "payments": {"付款", "支付"},
	"shipments": {"发货", "物流"}, "reviews": {"评价", "评论"}, "suppliers": {"供应商"}, "categories": {"类别", "分类"},
	"warehouses": {"仓库"}, "carriers": {"承运"}, "addresses": {"地址"}, "inventory": {"库存"},
}

func nameForms(table string) []string {
	forms := []string{strings.ReplaceAll(table, "_", " "), table}
	switch {
	case strings.HasSuffix(table, "ies"):
		forms = append(forms, strings.TrimSuffix(table, "ies")+"y")
	case strings.HasSuffix(table, "sses"):
		forms = append(forms, strings.TrimSuffix(table, "es"))
	case strings.HasSuffix(table, "s"):
		forms = append(forms, strings.TrimSuffix(strings.ReplaceAll(table, "_", " "), "s"))
	}
	return append(forms, zhNames[table]...)
}

// lastResult is the result of the step before when it ran SQL.
func (p plan) lastResult() (string, bool) {
	if len(p.req.Steps) == 0 {
		return "", false
	}
	last := p.req.Steps[len(p.req.Steps)-1]
	if last.Tool != "run_sql" || !last.OK {
		return "", false
	}
	for i := len(p.req.View) - 1; i >= 0; i-- {
		if p.req.View[i].Role == "tool" {
			return p.req.View[i].Content, true
		}
	}
	return "", false
}

func (p plan) answerFrom(result string) string {
	var r struct {
		SQL     string   `json:"sql"`
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}
	if err := json.Unmarshal([]byte(result), &r); err != nil || len(r.Rows) == 0 {
		return "The query found nothing."
	}
	var lines []string
	for _, row := range r.Rows[:min(len(r.Rows), 10)] {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = fmt.Sprintf("%s %v", r.Columns[i], v)
		}
		lines = append(lines, strings.Join(cells, ", "))
	}
	if p.zh {
		return fmt.Sprintf("结果：%s。\nSQL：%s", strings.Join(lines, "；"), r.SQL)
	}
	return fmt.Sprintf("Result: %s.\nSQL: %s", strings.Join(lines, "; "), r.SQL)
}

// column is a column of a known schema.
type column struct{ name, typ, ref string }

var schemaColumn = regexp.MustCompile(`^([A-Za-z0-9_]+) ([A-Za-z ]+?)(?: pk)?(?: → ([A-Za-z0-9_]+)\.[A-Za-z0-9_]+)?$`)

func (p plan) columns(table string) []column {
	text := p.req.Facts.Schema(table)
	if i := strings.LastIndex(text, " ("); i >= 0 {
		text = text[:i]
	}
	var out []column
	for _, part := range strings.Split(text, ", ") {
		if g := schemaColumn.FindStringSubmatch(part); g != nil {
			out = append(out, column{g[1], strings.ToUpper(g[2]), g[3]})
		}
	}
	return out
}

func numeric(c column) bool {
	return strings.Contains(c.typ, "INT") || strings.Contains(c.typ, "REAL") || strings.Contains(c.typ, "DOUBLE") ||
		strings.Contains(c.typ, "NUMERIC") || strings.Contains(c.typ, "DECIMAL")
}

var (
	topN     = regexp.MustCompile(`(?i)\b(?:top|first|most expensive|largest|highest|cheapest|lowest)\s+(\d+)\b|前\s*(\d+)`)
	quoted   = regexp.MustCompile(`'([^']+)'|"([^"]+)"|“([^”]+)”|\bin ([A-Z][a-zA-Z]+)|\bfrom ([A-Z][a-zA-Z]+)|在([\p{Han}]{2,4})`)
	sumWords = regexp.MustCompile(`(?i)\b(total|sum|average|avg|mean)\b|总|平均`)
)

// compile writes the SQL of the shapes the planner knows, with why.
func (p plan) compile(tables []string) (string, string) {
	main := tables[0]
	cols := p.columns(main)
	named := func() (column, bool) { // a numeric column the goal names
		for _, c := range cols {
			if numeric(c) && c.ref == "" && c.name != "id" && strings.Contains(p.goal, strings.ReplaceAll(c.name, "_", " ")) {
				return c, true
			}
		}
		return column{}, false
	}
	switch {
	case topN.MatchString(p.req.Goal):
		g := topN.FindStringSubmatch(p.req.Goal)
		n := cmp.Or(g[1], g[2])
		c, ok := named()
		if !ok {
			for _, x := range cols {
				if numeric(x) && x.ref == "" && x.name != "id" {
					c, ok = x, true
					break
				}
			}
		}
		if !ok {
			return "", main + " has no numeric column to rank by"
		}
		order := "DESC"
		if strings.Contains(p.goal, "cheapest") || strings.Contains(p.goal, "lowest") {
			order = "ASC"
		}
		return fmt.Sprintf(`SELECT * FROM "%s" ORDER BY "%s" %s LIMIT %s`, main, c.name, order, n), fmt.Sprintf("Rank %s by %s.", main, c.name)
	case sumWords.MatchString(p.req.Goal):
		c, ok := named()
		if !ok {
			return "", "the goal names no numeric column of " + main + " to add up"
		}
		agg := "sum"
		if strings.Contains(p.goal, "average") || strings.Contains(p.goal, "avg") || strings.Contains(p.goal, "mean") || strings.Contains(p.req.Goal, "平均") {
			agg = "avg"
		}
		if len(tables) > 1 {
			for _, fk := range cols {
				if fk.ref == tables[1] {
					by := p.labelColumn(tables[1])
					return fmt.Sprintf(`SELECT o."%s", round(%s(m."%s"), 2) AS %s_%s FROM "%s" m JOIN "%s" o ON o.id = m."%s" GROUP BY o."%s" ORDER BY 2 DESC`,
						by, agg, c.name, agg, c.name, main, tables[1], fk.name, by), fmt.Sprintf("%s of %s.%s by %s.%s.", agg, main, c.name, tables[1], by)
				}
			}
		}
		return fmt.Sprintf(`SELECT round(%s("%s"), 2) AS %s_%s FROM "%s"`, agg, c.name, agg, c.name, main), fmt.Sprintf("%s of %s.%s.", agg, main, c.name)
	case p.wantsCount():
		if v := p.value(); v != "" {
			var texts []string
			for _, c := range cols {
				if strings.Contains(c.typ, "TEXT") || strings.Contains(c.typ, "CHAR") {
					texts = append(texts, fmt.Sprintf(`"%s" = '%s'`, c.name, strings.ReplaceAll(v, "'", "''")))
				}
			}
			if len(texts) > 0 {
				return fmt.Sprintf(`SELECT count(*) AS count FROM "%s" WHERE %s`, main, strings.Join(texts, " OR ")),
					fmt.Sprintf("Count the %s with %q in any text column.", main, v)
			}
		}
		return fmt.Sprintf(`SELECT count(*) AS count FROM "%s"`, main), "Count the rows of " + main + "."
	}
	return "", "the goal is not a count, a top N, a sum or an average of one or two tables"
}

// labelColumn is the column that names a table's rows: "name" if any.
func (p plan) labelColumn(table string) string {
	for _, c := range p.columns(table) {
		if c.name == "name" || c.name == "title" || c.name == "city" {
			return c.name
		}
	}
	return "id"
}

// value is a value the goal names: quoted, or a capitalised place.
func (p plan) value() string {
	if g := quoted.FindStringSubmatch(p.req.Goal); g != nil {
		for _, v := range g[1:] {
			if v != "" {
				return v
			}
		}
	}
	return ""
}

// cannot is the honest answer when the planner cannot write the SQL.
func (p plan) cannot(why string) activities.PlanStep {
	f := p.req.Facts
	found := fmt.Sprintf("tables %s", strings.Join(f.Tables, ", "))
	for _, s := range f.Schemas {
		found += fmt.Sprintf("; %s: %s", s.Table, s.Text)
	}
	if p.zh {
		return activities.PlanStep{Answer: fmt.Sprintf("写出这个问题的 SQL 需要语言模型（%s）。已找到：%s。", why, found)}
	}
	return activities.PlanStep{Answer: fmt.Sprintf("Writing the SQL for this needs a language model (%s). What I found: %s.", why, found)}
}
