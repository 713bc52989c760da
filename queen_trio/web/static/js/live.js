// The refresh loop's handle for pages: after an action, refresh now rather than at the next
// tick (main.js installs the function).

export const live = {
  refreshNow: async () => {},
};
