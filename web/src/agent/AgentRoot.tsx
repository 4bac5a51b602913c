export function AgentRoot() { return null; }
