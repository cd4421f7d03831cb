package convo

import "fmt"

// source is a branch as the window algorithm reads it: by position, 0 being
// the root. The slice source is O(1) everywhere; the tree source is O(1) for
// positions walked back from the leaf and O(log depth) for far jumps, which
// is what keeps [Tree.Window] O(window).
type source interface {
	// length is the number of messages on the branch.
	length() int
	// at returns the message at position i, 0 <= i < length().
	at(i int) *Message
	// openAfter is the number of unanswered tool calls after position i.
	openAfter(i int) int
	// newestUser is the position of the last user message, -1 if none.
	newestUser() int
	// totalTokens is the sum of Tokens over the whole branch.
	totalTokens() int
	// appendRange appends the messages at positions [a, b) to dst.
	appendRange(dst []Message, a, b int) []Message
	// tokensBefore is the sum of Tokens over positions [0, i).
	tokensBefore(i int) int
	// hashAt is the path hash of positions [0, i].
	hashAt(i int) string
}

// promptOf is PromptTokens for n messages whose Tokens sum to sum.
func promptOf(sum, n int) int {
	if n == 0 {
		return 0
	}
	return sum + ReplyPrimingTokens
}

// validCut reports whether a window may start at position p: no tool call
// before p is still open at p.
func validCut(src source, p int) bool {
	return p == 0 || src.openAfter(p-1) == 0
}

// windowCut is a window as positions: the optional system prompt at 0, then
// [a1, b1) and [a2, n). For the "last" token strategy b1 == a2.
type windowCut struct {
	keepSys       bool
	a1, b1, a2, n int
	useTokens     bool
}

// cut is the window algorithm shared by [Trim], [Tree.Window], [Assemble]
// and the summary planner. Positions before floor are never kept (they are
// folded into a summary); reserve tokens are set aside for a summary.
func cut(src source, cfg WindowConfig, floor, reserve int) (windowCut, error) {
	n := src.length()
	if n == 0 {
		return windowCut{}, nil
	}
	if src.openAfter(n-1) > 0 {
		return windowCut{}, fmt.Errorf("branch ends at %q with an unanswered tool call: %w", src.at(n-1).ID, ErrUnansweredCall)
	}
	lo, sysTokens := 0, 0
	keepSys := cfg.IncludeSystem && src.at(0).Role == RoleSystem
	if keepSys {
		lo, sysTokens = 1, src.at(0).Tokens
	}
	lo = min(max(lo, floor), n)
	forced := n
	if u := src.newestUser(); u >= lo {
		forced = u
	}
	w := walker{src: src, cfg: cfg, lo: lo, n: n, forced: forced,
		budget:     cfg.MaxTokens - ReplyPrimingTokens - reserve - cfg.Reserve - sysTokens,
		useTokens:  cfg.usesTokens(),
		useRounds:  cfg.usesRounds(),
		startHuman: cfg.StartOn == StartOnHuman,
	}
	wc := windowCut{keepSys: keepSys, n: n, useTokens: w.useTokens}
	if w.useTokens && cfg.TokenStrategy == TokenStrategyFirst {
		regionLo := lo
		if w.useRounds {
			regionLo = w.roundsStart()
		}
		wc.a1, wc.b1 = w.firstPrefix(regionLo, w.budget-w.tailTokens())
		wc.a2 = forced
	} else {
		wc.a2 = w.lastStart()
		wc.a1, wc.b1 = wc.a2, wc.a2
	}
	return wc, nil
}

// messages materialises the cut.
func (wc windowCut) messages(src source) []Message {
	out := make([]Message, 0, (wc.b1-wc.a1)+(wc.n-wc.a2)+1)
	if wc.keepSys {
		out = append(out, *src.at(0))
	}
	out = src.appendRange(out, wc.a1, wc.b1)
	return src.appendRange(out, wc.a2, wc.n)
}

// trim runs cut and reports it as a [Trimmed].
func trim(src source, cfg WindowConfig, floor, reserve int) (Trimmed, error) {
	wc, err := cut(src, cfg, floor, reserve)
	if err != nil {
		return Trimmed{}, err
	}
	res := Trimmed{Messages: wc.messages(src), TokensBefore: promptOf(src.totalTokens(), src.length())}
	res.TrimmedCount = src.length() - len(res.Messages)
	res.TokensAfter = PromptTokens(res.Messages)
	res.OverBudget = wc.useTokens && res.TokensAfter+reserve+cfg.Reserve > cfg.MaxTokens
	return res, nil
}

type walker struct {
	src                              source
	cfg                              WindowConfig
	lo, n, forced, budget            int
	useTokens, useRounds, startHuman bool
}

// lastStart walks back from the newest message and returns the earliest
// position the window may start at. It stops at the first message that breaks
// a limit, so it reads O(window) messages plus at most one round.
func (w *walker) lastStart() int {
	start := w.n
	tokens, rounds := 0, 0
	for p := w.n - 1; p >= w.lo; p-- {
		m := w.src.at(p)
		tokens += m.Tokens
		isUser := m.Role == RoleUser
		if isUser {
			rounds++
		}
		if p > w.forced {
			continue
		}
		if p == w.forced {
			start = p
			continue
		}
		if (w.useRounds && rounds > w.cfg.MaxRounds) || (w.useTokens && tokens > w.budget) {
			break
		}
		if !validCut(w.src, p) || (w.startHuman && !isUser) || (w.useRounds && !isUser && p != w.lo) {
			continue
		}
		start = p
	}
	return start
}

// roundsStart is where the last MaxRounds rounds begin.
func (w *walker) roundsStart() int {
	start := w.n
	rounds := 0
	for p := w.n - 1; p >= w.lo; p-- {
		m := w.src.at(p)
		isUser := m.Role == RoleUser
		if isUser {
			rounds++
			if rounds > w.cfg.MaxRounds {
				break
			}
		}
		if (isUser || p == w.lo) && validCut(w.src, p) {
			start = p
		}
	}
	return start
}

// tailTokens is the cost of the always-kept newest round.
func (w *walker) tailTokens() int {
	t := 0
	for p := w.forced; p < w.n; p++ {
		t += w.src.at(p).Tokens
	}
	return t
}

// firstPrefix returns [s, e): the longest run of whole tool units from the
// start of [regionLo, forced) (a user message with start_on human) whose
// tokens fit in avail.
func (w *walker) firstPrefix(regionLo, avail int) (int, int) {
	s := regionLo
	for s < w.forced && (!validCut(w.src, s) || (w.startHuman && w.src.at(s).Role != RoleUser)) {
		s++
	}
	e, tokens := s, 0
	for p := s; p < w.forced; p++ {
		tokens += w.src.at(p).Tokens
		if tokens > avail {
			break
		}
		if w.src.openAfter(p) == 0 {
			e = p + 1
		}
	}
	return s, e
}

// sliceSource is a validated branch held in memory.
type sliceSource struct {
	msgs []Message
	open []int32
	cum  []int // cum[i] = Tokens summed over [0, i)
	user int
}

// newSliceSource checks the field rules and tool pairing of a whole branch,
// except that the branch may end with unanswered calls (reported by trim).
func newSliceSource(msgs []Message) (*sliceSource, error) {
	s := &sliceSource{msgs: msgs, open: make([]int32, len(msgs)), cum: make([]int, len(msgs)+1), user: -1}
	var p pairing
	for i := range msgs {
		if err := p.step(&msgs[i]); err != nil {
			return nil, fmt.Errorf("branch message %d: %w", i, err)
		}
		s.open[i] = int32(len(p.open))
		s.cum[i+1] = s.cum[i] + msgs[i].Tokens
		if msgs[i].Role == RoleUser {
			s.user = i
		}
	}
	return s, nil
}

func (s *sliceSource) length() int            { return len(s.msgs) }
func (s *sliceSource) at(i int) *Message      { return &s.msgs[i] }
func (s *sliceSource) openAfter(i int) int    { return int(s.open[i]) }
func (s *sliceSource) newestUser() int        { return s.user }
func (s *sliceSource) totalTokens() int       { return s.cum[len(s.msgs)] }
func (s *sliceSource) tokensBefore(i int) int { return s.cum[i] }
func (s *sliceSource) hashAt(i int) string    { return BranchHash(s.msgs[:i+1]) }
func (s *sliceSource) appendRange(dst []Message, a, b int) []Message {
	return append(dst, s.msgs[a:b]...)
}
