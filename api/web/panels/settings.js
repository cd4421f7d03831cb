// Settings (in the header): the API key, kept in localStorage and sent as
// Authorization: Bearer; and the Temporal UI's address for the links.

import { h } from '../dom.js';
import { settings } from '../api.js';

export default {
  id: 'settings',
  inline: true,
  mount(root) {
    const key = h('input', { id: 'api-key', type: 'password', autocomplete: 'off', placeholder: 'API key (none)', value: settings.apiKey });
    const ui = h('input', { id: 'temporal-ui', placeholder: 'http://host:8233', value: localStorage.getItem('ctxflow.temporalUI') || '' });
    const save = (e) => {
      e.preventDefault();
      settings.apiKey = key.value.trim();
      if (ui.value.trim()) localStorage.setItem('ctxflow.temporalUI', ui.value.trim());
      else localStorage.removeItem('ctxflow.temporalUI');
      location.reload();
    };
    root.append(h('details.settings', {},
      h('summary', {}, settings.apiKey ? 'Settings · key set' : 'Settings'),
      h('form', { onsubmit: save },
        h('label', {}, 'API key', key),
        h('label', {}, 'Temporal UI', ui),
        h('button.primary', { id: 'save-settings', type: 'submit' }, 'Save'))));
  },
};
