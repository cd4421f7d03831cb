package sqltools

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The demo database: a small shop of 14 tables and about 14,000 rows,
// generated (deterministically: the same rows on every machine) the first
// time `ctxflow dev` needs it, so that a newcomer can try agent tasks with
// `make run` alone. Nothing of it is committed.

// DemoTables are the demo database's tables.
var DemoTables = []string{
	"addresses", "carriers", "categories", "customers", "inventory", "order_items", "orders",
	"payment_methods", "payments", "products", "reviews", "shipments", "suppliers", "warehouses",
}

const demoSchema = `
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL, parent_id INTEGER REFERENCES categories(id));
CREATE TABLE suppliers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category_id INTEGER NOT NULL REFERENCES categories(id),
	supplier_id INTEGER NOT NULL REFERENCES suppliers(id), price DOUBLE PRECISION NOT NULL, launched_on TEXT NOT NULL);
CREATE TABLE warehouses (id INTEGER PRIMARY KEY, city TEXT NOT NULL, capacity INTEGER NOT NULL);
CREATE TABLE inventory (product_id INTEGER NOT NULL REFERENCES products(id), warehouse_id INTEGER NOT NULL REFERENCES warehouses(id),
	quantity INTEGER NOT NULL, PRIMARY KEY (product_id, warehouse_id));
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL, joined_on TEXT NOT NULL);
CREATE TABLE addresses (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), street TEXT NOT NULL,
	city TEXT NOT NULL, postcode TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), address_id INTEGER NOT NULL REFERENCES addresses(id),
	ordered_at TEXT NOT NULL, status TEXT NOT NULL, total DOUBLE PRECISION NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL REFERENCES products(id),
	quantity INTEGER NOT NULL, unit_price DOUBLE PRECISION NOT NULL);
CREATE TABLE payment_methods (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE payments (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), method_id INTEGER NOT NULL REFERENCES payment_methods(id),
	amount DOUBLE PRECISION NOT NULL, paid_at TEXT NOT NULL);
CREATE TABLE carriers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE shipments (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), carrier_id INTEGER NOT NULL REFERENCES carriers(id),
	warehouse_id INTEGER NOT NULL REFERENCES warehouses(id), shipped_at TEXT NOT NULL, delivered_at TEXT);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id), customer_id INTEGER NOT NULL REFERENCES customers(id),
	rating INTEGER NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL);
`

// EnsureDemo writes the demo database at path unless a file is there. It
// is written to a temporary file and renamed into place, so that a crash
// never leaves half a database.
func EnsureDemo(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("demo database: %w", err)
	}
	tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	if err := writeDemo(ctx, tmp); err != nil {
		return fmt.Errorf("demo database: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("demo database: %w", err)
	}
	return nil
}

func writeDemo(ctx context.Context, path string) (err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	db.SetMaxOpenConns(1)
	return LoadDemo(ctx, db, SQLite)
}

// LoadDemo creates the demo's tables and rows in an empty database of the
// dialect (the tests load it into PostgreSQL too).
func LoadDemo(ctx context.Context, db *sql.DB, dialect string) error {
	if _, err := db.ExecContext(ctx, demoSchema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	g := &demoGen{tx: tx, ctx: ctx, r: rand.New(rand.NewPCG(20260101, 42)), dialect: dialect}
	g.fill()
	if g.err != nil {
		return g.err
	}
	return tx.Commit()
}

type demoGen struct {
	tx      *sql.Tx
	ctx     context.Context
	r       *rand.Rand
	dialect string
	err     error
}

func (g *demoGen) insert(table string, cols string, rows [][]any) {
	if g.err != nil || len(rows) == 0 {
		return
	}
	marks := make([]string, strings.Count(cols, ",")+1)
	for i := range marks {
		marks[i] = "?"
		if g.dialect == Postgres {
			marks[i] = fmt.Sprint("$", i+1)
		}
	}
	stmt, err := g.tx.PrepareContext(g.ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, cols, strings.Join(marks, ",")))
	if err != nil {
		g.err = fmt.Errorf("%s: %w", table, err)
		return
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(g.ctx, r...); err != nil {
			g.err = fmt.Errorf("%s: %w", table, err)
			return
		}
	}
}

func (g *demoGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *demoGen) date(from time.Time, days int) time.Time {
	return from.AddDate(0, 0, g.r.IntN(days))
}

var (
	cities = []struct{ city, country string }{
		{"Berlin", "Germany"}, {"Munich", "Germany"}, {"Hamburg", "Germany"}, {"Paris", "France"}, {"Lyon", "France"},
		{"London", "United Kingdom"}, {"Madrid", "Spain"}, {"Rome", "Italy"}, {"上海", "China"}, {"北京", "China"},
	}
	firstNames = []string{"Anna", "Ben", "Chloé", "David", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Karin", "Luca", "Mia", "Noah", "李", "王", "张"}
	lastNames  = []string{"Schmidt", "Müller", "Dubois", "Smith", "García", "Rossi", "Weber", "Martin", "Fischer", "Moreau", "伟", "芳", "娜", "敏"}
)

func (g *demoGen) fill() {
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cats := []string{"Electronics", "Phones", "Laptops", "Home", "Kitchen", "Garden", "Books", "Toys", "Sports", "Clothing", "Shoes", "Beauty"}
	parent := map[string]any{"Phones": 1, "Laptops": 1, "Kitchen": 4, "Garden": 4, "Shoes": 10}
	var rows [][]any
	for i, c := range cats {
		rows = append(rows, []any{i + 1, c, parent[c]})
	}
	g.insert("categories", "id, name, parent_id", rows)

	rows = nil
	for i := range 20 {
		c := cities[i%len(cities)]
		rows = append(rows, []any{i + 1, fmt.Sprintf("Supplier %c%c", 'A'+i%26, 'a'+(i*7)%26), c.country})
	}
	g.insert("suppliers", "id, name, country", rows)

	rows = nil
	prices := make([]float64, 201)
	brands := []string{"Acme", "Nova", "Zenith", "Orbit", "华为", "小米", "Helio", "Quokka"}
	kinds := map[int][]string{1: {"Speaker", "Headphones", "Camera"}, 2: {"Phone", "Mate", "Pixel"}, 3: {"Laptop", "Notebook"},
		4: {"Lamp", "Chair"}, 5: {"Kettle", "Pan", "Toaster"}, 6: {"Hose", "Shovel"}, 7: {"Novel", "Cookbook"}, 8: {"Puzzle", "Robot"},
		9: {"Ball", "Racket"}, 10: {"Jacket", "Shirt"}, 11: {"Sneaker", "Boot"}, 12: {"Cream", "Perfume"}}
	for i := range 200 {
		cat := 1 + i%12
		name := fmt.Sprintf("%s %s %d", g.pick(brands), g.pick(kinds[cat]), 10+i)
		price := float64(5+g.r.IntN(1500)) + 0.99
		prices[i+1] = price
		rows = append(rows, []any{i + 1, name, cat, 1 + g.r.IntN(20), price, g.date(day0.AddDate(-2, 0, 0), 700).Format(time.DateOnly)})
	}
	g.insert("products", "id, name, category_id, supplier_id, price, launched_on", rows)

	rows = nil
	for i, c := range []string{"Berlin", "Paris", "Madrid", "上海", "London"} {
		rows = append(rows, []any{i + 1, c, 5000 + 1000*i})
	}
	g.insert("warehouses", "id, city, capacity", rows)

	rows = nil
	for p := range 200 {
		for w := range 5 {
			if (p+w)%5 != 4 && (p*w)%3 != 2 {
				rows = append(rows, []any{p + 1, w + 1, g.r.IntN(300)})
			}
		}
	}
	g.insert("inventory", "product_id, warehouse_id, quantity", rows)

	rows = nil
	for i := range 500 {
		c := cities[g.r.IntN(len(cities))]
		first, last := g.pick(firstNames), g.pick(lastNames)
		rows = append(rows, []any{i + 1, first + " " + last, fmt.Sprintf("customer%d@example.com", i+1), c.city, c.country,
			g.date(day0.AddDate(-3, 0, 0), 1000).Format(time.DateOnly)})
	}
	g.insert("customers", "id, name, email, city, country, joined_on", rows)

	rows = nil
	addrOf := map[int][]int{}
	for i := range 650 {
		cust := 1 + i%500
		c := cities[g.r.IntN(len(cities))]
		addrOf[cust] = append(addrOf[cust], i+1)
		rows = append(rows, []any{i + 1, cust, fmt.Sprintf("%d Main Street", 1+g.r.IntN(200)), c.city, fmt.Sprintf("%05d", g.r.IntN(99999)),
			map[bool]string{true: "home", false: "work"}[i < 500]})
	}
	g.insert("addresses", "id, customer_id, street, city, postcode, kind", rows)

	var orders, items, payments, shipments [][]any
	statuses := []string{"delivered", "delivered", "delivered", "shipped", "paid", "cancelled"}
	itemID := 0
	for o := range 2000 {
		cust := 1 + g.r.IntN(500)
		at := g.date(day0, 700)
		status := g.pick(statuses)
		total := 0.0
		for range 1 + g.r.IntN(4) {
			itemID++
			p, q := 1+g.r.IntN(200), 1+g.r.IntN(3)
			items = append(items, []any{itemID, o + 1, p, q, prices[p]})
			total += float64(q) * prices[p]
		}
		total = float64(int(total*100)) / 100
		addrs := addrOf[cust]
		orders = append(orders, []any{o + 1, cust, addrs[g.r.IntN(len(addrs))], at.Format(time.DateTime), status, total})
		if status != "cancelled" {
			payments = append(payments, []any{len(payments) + 1, o + 1, 1 + g.r.IntN(5), total, at.Add(time.Duration(g.r.IntN(3600)) * time.Second).Format(time.DateTime)})
		}
		if status == "shipped" || status == "delivered" {
			shipped := at.AddDate(0, 0, 1+g.r.IntN(3))
			var delivered any
			if status == "delivered" {
				delivered = shipped.AddDate(0, 0, 1+g.r.IntN(5)).Format(time.DateTime)
			}
			shipments = append(shipments, []any{len(shipments) + 1, o + 1, 1 + g.r.IntN(4), 1 + g.r.IntN(5), shipped.Format(time.DateTime), delivered})
		}
	}
	g.insert("orders", "id, customer_id, address_id, ordered_at, status, total", orders)
	g.insert("order_items", "id, order_id, product_id, quantity, unit_price", items)
	g.insert("payment_methods", "id, name", [][]any{{1, "card"}, {2, "paypal"}, {3, "bank transfer"}, {4, "alipay"}, {5, "invoice"}})
	g.insert("payments", "id, order_id, method_id, amount, paid_at", payments)
	g.insert("carriers", "id, name", [][]any{{1, "DHL"}, {2, "UPS"}, {3, "La Poste"}, {4, "顺丰"}})
	g.insert("shipments", "id, order_id, carrier_id, warehouse_id, shipped_at, delivered_at", shipments)

	rows = nil
	bodies := []string{"Great value.", "Broke after a week.", "Exactly as described.", "Too expensive for what it is.", "非常好用。", "物流很快。"}
	for i := range 800 {
		rows = append(rows, []any{i + 1, 1 + g.r.IntN(200), 1 + g.r.IntN(500), 1 + g.r.IntN(5), g.pick(bodies), g.date(day0, 700).Format(time.DateOnly)})
	}
	g.insert("reviews", "id, product_id, customer_id, rating, body, created_at", rows)
}
