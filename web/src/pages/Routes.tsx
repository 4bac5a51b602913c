export function Routes() { return <p>pages</p>; }
