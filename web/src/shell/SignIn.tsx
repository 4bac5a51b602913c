export function SignIn() { return <main>sign in</main>; }
