// Branches: every leaf of the conversation tree (GET .../tree), its last
// question, which one is active; view one (GET .../messages?leaf=) or
// continue it (POST .../branch).

import { h, fill, errorBox } from '../dom.js';
import { api, sessionPath } from '../api.js';

export default {
  id: 'tree',
  title: 'Branches',
  mount(root, app) {
    const list = h('ul.branches', { id: 'branches' });
    root.append(list);

    async function activate(leaf) {
      try {
        await api('POST', `${sessionPath(app.session)}/branch`, { fromMessageId: leaf });
        app.viewLeaf = '';
        await app.refresh();
      } catch (e) { app.notify(e); }
    }

    app.on(() => {
      if (!app.session) return fill(list, h('li.empty', {}, 'Select a session to see its branches.'));
      if (app.errors.tree) {
        return fill(list, app.state ? h('li', {}, errorBox(app.errors.tree)) : h('li.empty', {}, 'No messages yet.'));
      }
      const nodes = (app.tree && app.tree.nodes) || [];
      const byId = new Map(nodes.map((n) => [n.id, n]));
      const leaves = nodes.filter((n) => !n.children.length);
      if (!leaves.length) return fill(list, h('li.empty', {}, 'No messages yet.'));
      const active = app.tree.activeLeaf;
      const shown = app.viewLeaf || active;
      fill(list, leaves.map((leaf) => {
        let q = leaf;
        let depth = 0;
        for (let n = leaf; n; n = byId.get(n.parentId)) depth++;
        while (q && q.role !== 'user') q = byId.get(q.parentId);
        return h('li', { class: [leaf.id === active ? 'active' : '', leaf.id === shown ? 'shown' : ''].join(' '), dataset: { leaf: leaf.id } },
          h('div', {}, q ? q.preview : leaf.preview),
          h('div.row.muted', {}, `${depth} messages · ${leaf.id}`, leaf.id === active ? ' · active' : '',
            h('span.grow'),
            leaf.id === shown ? null : h('button.link.view', { onclick: () => { app.viewLeaf = leaf.id === active ? '' : leaf.id; app.refresh(); } }, 'View'),
            leaf.id === active ? null : h('button.link.switch', { onclick: () => activate(leaf.id) }, 'Continue here')));
      }));
    });
  },
};
